package main

import (
	"errors"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/cells"
)

// TestCellCacheSizeFromEnv: AOS_CELL_CACHE_SIZE is read here, at the edge,
// and handed to the kernel as cells.Config.CacheSize.
func TestCellCacheSizeFromEnv(t *testing.T) {
	t.Setenv(envCellCache, "17")
	cfg, err := envConfig()
	if err != nil || cfg.Cells.CacheSize != 17 {
		t.Fatalf("config %+v, %v", cfg.Cells, err)
	}
	t.Setenv(envCellCache, "lots")
	if _, err := envConfig(); !errors.Is(err, cells.ErrBadConfig) {
		t.Fatalf("bad env accepted: %v", err)
	}
	t.Setenv(envCellCache, "")
	if cfg, err := envConfig(); cfg.Cells.CacheSize != 0 || err != nil {
		t.Fatalf("empty: %+v %v (want 0, the cells default)", cfg.Cells, err)
	}
	if n, err := cellCacheSize("", false); n != 0 || err != nil {
		t.Fatalf("unset: %d %v", n, err)
	}
}

// TestDiskReserveFromEnv: AOS_DISK_RESERVE is read here, at the edge, into
// the store's options: bytes, or KiB, MiB or GiB; unset is the default; a
// size that is not positive, malformed or too large is a usage error naming
// the variable.
func TestDiskReserveFromEnv(t *testing.T) {
	for in, want := range map[string]int64{"": 0, "1048576": 1 << 20, "64KiB": 64 << 10, "256MiB": 256 << 20, "2GiB": 2 << 30} {
		t.Setenv(envReserve, in)
		so, err := envStore()
		if err != nil || so.DiskReserve != want {
			t.Errorf("%s=%q: %d, %v; want %d", envReserve, in, so.DiskReserve, err, want)
		}
	}
	for _, bad := range []string{"0", "-5MiB", "lots", "12MB", "MiB", "9999999999GiB"} {
		t.Setenv(envReserve, bad)
		_, err := envStore()
		var ue *usageError
		if !errors.As(err, &ue) || !strings.Contains(err.Error(), envReserve) {
			t.Errorf("%s=%q accepted or not a usage error naming it: %v", envReserve, bad, err)
		}
	}
}
