package host

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/journal"
	"github.com/aos-kernel/aos/kernel"
	"github.com/aos-kernel/aos/manifest"
	"github.com/aos-kernel/aos/modules"
	"github.com/aos-kernel/aos/modules/wasm"
	"github.com/aos-kernel/aos/records"
	"github.com/aos-kernel/aos/schemas"
	"github.com/aos-kernel/aos/views"
)

// maxExportLine bounds one line of an export (a manifest record carries
// the manifest's source).
const maxExportLine = 64 << 20

// ReplayExport is `aosd replay --manifest PATH --export FILE`: the offline
// check of manifest m (kernel.ReplayManifest) against a world export read
// from in (name names it in errors), with no world at all. An export holds
// the journal, not the code its manifests ran: m's own wasm artifacts are
// offered, and every regular file in artifactsDir ("" none) by its hash,
// so a module whose code m changes needs its old artifact there. The
// export must start at seq 1 (one of a journal retention cut can only be
// checked against its world: `aosd replay --manifest PATH --world W`).
func ReplayExport(ctx context.Context, in io.Reader, name, artifactsDir string, m *manifest.Manifest, cfg kernel.Config) (*kernel.UpgradeReport, error) {
	log := journal.NewMemory()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 0, 64<<10), maxExportLine)
	var n int
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(strings.TrimSpace(string(line))) == 0 {
			continue
		}
		r, err := views.ParseRecord(line)
		if err != nil {
			return nil, fmt.Errorf("%s line %d: %w", name, n, err)
		}
		if err := log.Append([]journal.Record{r}); err != nil {
			if log.Height() == 0 {
				return nil, fmt.Errorf("%s line %d: the export starts at seq %d; the offline check replays from genesis, so it needs an export from seq 1 (or check the world itself: --world)", name, n, r.Seq)
			}
			return nil, fmt.Errorf("%s line %d: seq %d after seq %d: %w", name, n, r.Seq, log.Height(), err)
		}
	}
	if err := sc.Err(); err != nil {
		if errors.Is(err, bufio.ErrTooLong) {
			return nil, fmt.Errorf("%s line %d: longer than %d bytes", name, n+1, maxExportLine)
		}
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	if log.Height() == 0 {
		return nil, fmt.Errorf("%s holds no journal records", name)
	}
	objs := cas.NewMemory()
	for _, md := range m.Modules {
		if b := md.Runtime.Bytes; b != nil {
			if _, err := objs.Put(b); err != nil {
				return nil, err
			}
		}
	}
	if artifactsDir != "" {
		ents, err := os.ReadDir(artifactsDir)
		if err != nil {
			return nil, fmt.Errorf("--artifacts: %w", err)
		}
		for _, e := range ents {
			if !e.Type().IsRegular() {
				continue
			}
			b, err := os.ReadFile(filepath.Join(artifactsDir, e.Name()))
			if err != nil {
				return nil, fmt.Errorf("--artifacts: %w", err)
			}
			if _, err := objs.Put(b); err != nil {
				return nil, err
			}
		}
	}
	// Every manifest the export applied must find its code, or the
	// replay would stop at it: say which, and where to put it.
	if err := log.Read(1, func(r journal.Record) (bool, error) {
		if r.Kind != journal.KindManifest {
			return true, nil
		}
		var mr records.ManifestRec
		if err := schemas.UnmarshalTrusted(r.Body, &mr); err != nil {
			return false, fmt.Errorf("%s: the manifest record at seq %d: %w", name, r.Seq, err)
		}
		if _, err := manifest.FromSource(mr.Source, objs.Get); err != nil {
			return false, fmt.Errorf("%s: manifest %s applied at seq %d runs code the export does not hold (an export is the journal alone): "+
				"give --artifacts DIR with its wasm artifacts: %w", name, mr.Name, r.Seq, err)
		}
		return true, nil
	}); err != nil {
		return nil, err
	}
	if cfg.Wasm == nil {
		e, err := wasm.NewEngine(ctx, wasm.Config{})
		if err != nil {
			return nil, err
		}
		defer e.Close(ctx)
		cfg.Wasm = e
	}
	if cfg.Builtins == nil {
		cfg.Builtins = modules.NewBuiltins()
	}
	rep, err := kernel.ReplayManifest(ctx, kernel.Stores{CAS: objs, Journal: log}, cfg, m)
	if err != nil {
		return nil, fmt.Errorf("replay %s under manifest %s: %w", name, m.Name, err)
	}
	return rep, nil
}
