package cells

// API pinned for the kernel; implemented by the cells work (DESIGN.md §8).
//
//   type Entry struct {
//       Key        []byte
//       StateHash  schemas.Hash
//       Size       uint64 // state bytes
//       LastActive uint64 // logical ns from the ingress stamp (deterministic)
//   }
//   type Config struct {
//       CacheSize      int   // clean cells in the hot LRU; 0 -> CacheSizeFromEnv() (AOS_CELL_CACHE_SIZE, default 4096)
//       SpillThreshold int   // a dirty state larger than this goes to CAS at once (default 64 KiB)
//       ResidentBudget int64 // resident dirty bytes beyond this spill, oldest first (default 64 MiB)
//   }
//   func NewHead(store cas.Store, root schemas.Hash, cfg Config) (*Head, error) // root zero = empty index
//   func (h *Head) Get(key []byte) (state []byte, ok bool, err error)  // delta -> LRU -> index/CAS
//   func (h *Head) Lookup(key []byte) (Entry, bool, error)              // metadata only
//   func (h *Head) Put(key, state []byte, lastActive uint64) error      // state is canonical CBOR
//   func (h *Head) Delete(key []byte) error
//   func (h *Head) Ascend(fn func(Entry) (bool, error)) error          // merged index+delta, key-hash order
//   func (h *Head) Materialize() (schemas.Hash, error)                  // flush delta, new root
//   func (h *Head) Root() schemas.Hash                                  // root as of last Materialize
//   func (h *Head) Len() int                                            // live cells (index + delta)
//   func (h *Head) Stats() Stats                                        // resident bytes, dirty, spilled, cache hits/misses
