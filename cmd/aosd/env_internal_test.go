package main

import (
	"errors"
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
