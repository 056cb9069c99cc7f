package cells

import (
	"strconv"
	"testing"

	"github.com/aos-kernel/aos/cas"
	"github.com/aos-kernel/aos/schemas"
)

// hookStore calls onGet before every Get.
type hookStore struct {
	cas.Store
	onGet func()
}

func (s *hookStore) Get(h schemas.Hash) ([]byte, error) {
	if s.onGet != nil {
		s.onGet()
	}
	return s.Store.Get(h)
}

// TestPageReadsStoreWithoutLock: Page reads index nodes from the store with
// the head's lock released, so the writer (the kernel loop) never waits for
// a page's I/O; AscendFrom, by contrast, holds the read lock throughout.
func TestPageReadsStoreWithoutLock(t *testing.T) {
	store := &hookStore{Store: cas.NewMemory()}
	h, err := NewHead(store, EmptyRoot, Config{CacheSize: 1})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		key := schemas.MustMarshal("k" + strconv.Itoa(i))
		if err := h.Put(key, schemas.MustMarshal(i), 1); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.Materialize(); err != nil {
		t.Fatal(err)
	}
	// Some dirty cells over the index, so a page merges both.
	for i := 0; i < 500; i += 7 {
		if err := h.Put(schemas.MustMarshal("k"+strconv.Itoa(i)), schemas.MustMarshal(-i), 2); err != nil {
			t.Fatal(err)
		}
	}
	gets, locked := 0, 0
	store.onGet = func() {
		gets++
		if !h.mu.TryLock() {
			locked++
			return
		}
		h.mu.Unlock()
	}
	page, err := h.Page(nil, 100)
	if err != nil || len(page) != 100 {
		t.Fatalf("Page: %d cells, %v", len(page), err)
	}
	if gets == 0 || locked != 0 {
		t.Fatalf("Page read the store %d times, %d of them with the head locked", gets, locked)
	}
	// The probe itself works: AscendFrom holds the lock while it reads.
	gets, locked = 0, 0
	n := 0
	if err := h.AscendFrom(nil, func(Entry) (bool, error) { n++; return n < 100, nil }); err != nil {
		t.Fatal(err)
	}
	if gets == 0 || locked != gets {
		t.Fatalf("AscendFrom read the store %d times, %d of them with the head locked", gets, locked)
	}
}
