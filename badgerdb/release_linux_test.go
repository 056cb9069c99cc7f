package badgerdb_test

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/aos-kernel/aos/badgerdb"
	"github.com/aos-kernel/aos/journal"
)

// rssFileMB is this process's resident pages of mapped files (RssFile in
// /proc/self/status), in MB.
func rssFileMB(t *testing.T) float64 {
	t.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	mb := parseStatusMB(string(data), "RssFile:")
	if mb < 0 {
		t.Fatal("no RssFile in /proc/self/status")
	}
	return mb
}

// parseStatusMB is field of a /proc/self/status text in MB (-1: absent).
func parseStatusMB(status, field string) float64 {
	for _, l := range strings.Split(status, "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == field {
			if kb, err := strconv.ParseFloat(f[1], 64); err == nil {
				return kb / 1024
			}
		}
	}
	return -1
}

// TestLongReadReleasesMappedPages: Badger reads the journal's frames
// through its memory-mapped value log, so a read of the whole journal left
// every page of it resident in the process (`aosd replay --verify` held
// about 0.3 GB per million records). A Read releases the store's mapped
// pages every releaseEvery bytes of frames: reading 48 MiB of frames with a
// release every 4 MiB grows the resident file pages by far less than the
// same read without releases does (which the test measures first, so it
// knows the pages it counts are the ones the read maps).
func TestLongReadReleasesMappedPages(t *testing.T) {
	db := openDisk(t, t.TempDir())
	defer db.Close()
	j := db.Journal()
	const frames, size = 48, 1 << 20
	for i := range frames {
		body := bytes.Repeat([]byte{byte(i)}, size)
		if err := j.Append([]journal.Record{{Seq: uint64(i + 1), Kind: journal.KindEvent, Body: body}}); err != nil {
			t.Fatal(err)
		}
	}
	readAll := func() float64 {
		if j.ReleaseMapped() == 0 {
			t.Fatal("no mapped file of the store found in /proc/self/maps")
		}
		before := rssFileMB(t)
		n := 0
		if err := j.Read(1, func(r journal.Record) (bool, error) {
			n++
			return true, nil
		}); err != nil {
			t.Fatal(err)
		}
		if n != frames {
			t.Fatalf("read %d records, want %d", n, frames)
		}
		return rssFileMB(t) - before
	}
	old := badgerdb.SetReleaseEvery(1 << 60)
	defer badgerdb.SetReleaseEvery(old)
	unreleased := readAll()
	if unreleased < 32 {
		t.Fatalf("reading %d MiB of frames without releases grew the resident file pages by %.1f MB: the measurement does not see the read", frames, unreleased)
	}
	badgerdb.SetReleaseEvery(4 << 20)
	released := readAll()
	if released > 12 {
		t.Fatalf("reading %d MiB of frames releasing every 4 MiB grew the resident file pages by %.1f MB (%.1f MB without releases)", frames, released, unreleased)
	}
	t.Logf("resident file pages grown by the read: %.1f MB without releases, %.1f MB with one every 4 MiB", unreleased, released)
}
