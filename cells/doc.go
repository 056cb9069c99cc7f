// Package cells owns the keyed state of keyed workflows: the content-addressed
// CellIndex, the hot LRU of clean cells and the dirty delta layer with spill
// (DESIGN.md §8, §9). It stores only through cas.Store and never imports the
// kernel; it knows nothing of journals, schedules or snapshots beyond handing
// back a root hash from Materialize.
//
// # CellIndex: a canonical hash-keyed radix trie
//
// The index maps key_hash = SHA-256(key bytes) to Entry{Key, StateHash, Size,
// LastActive}. It is a radix trie over the nibbles of the key hash (fan-out 16)
// whose nodes are canonical CBOR objects in the CAS:
//
//	leaf   = [0, [[key_hash, key, state_hash, size, last_active], ...]]   1..32 entries, key-hash order
//	branch = [1, bitmap, [[child_hash, child_count], ...]]                 children in nibble order
//
// The shape rule: a subtree is a leaf exactly when it holds 1..LeafMax (32)
// entries, a branch exactly when it holds more, and an empty subtree is absent
// (a zero bitmap bit; the empty index is EmptyRoot, the zero hash, which names
// no object). The subtree at a path is the set of entries whose key hashes
// start with that path, so the rule fixes every node from the set alone: the
// trie, and so the root hash, is a pure function of the set of entries, with no
// trace of insertion order, batching or deletions. Apply keeps the rule on both
// sides: a leaf that grows past LeafMax splits by the next nibble, and a branch
// whose count falls to LeafMax or below collapses into one leaf (the counts
// stored beside each child make that decision without reading siblings; a
// collapse reads at most LeafMax entries). The decoder rejects anything off
// the rule (an empty leaf, a branch of <= LeafMax entries, unsorted entries,
// non-shortest CBOR, trailing bytes), so every accepted node has exactly one
// encoding; FuzzDecodeNode pins that decode-then-encode is the identity.
//
// Why this shape: hash-keyed paths keep the trie balanced whatever the keys
// (depth ~ log16(n/LeafMax): 4-5 for a million cells); bucketed leaves keep
// the node count near n/16 instead of n, and fan-out 16 keeps a branch small
// (~0.6 KiB), so a change rewrites about one leaf and 4 branches, ~3 KiB.
//
// Costs, n cells, d = depth ~ log16(n/LeafMax), c changed cells in a batch:
// Lookup reads d+1 nodes (branches come from a shared decoded-branch cache of
// 4096 nodes, so usually one leaf read); Apply reads and writes O(c x d) nodes,
// never more than the whole trie, and writes nothing for no-op changes; Ascend
// is O(n), and a walk from a key hash on descends straight to it (d+1 nodes)
// before it reads k entries from about k/LeafMax leaves. Apply writes new nodes with PutBatch in 16 MiB chunks; a failure
// leaves only unreferenced objects behind.
//
// Children, Refs and GCChildren expose a node's references (child nodes, and
// the state hashes held by leaves) for garbage collection from snapshot roots.
//
// # Head: delta -> hot cache -> index
//
// Head is the live view of one workflow's cells. Reads go delta, then the hot
// LRU (github.com/hashicorp/golang-lru/v2, clean cells, Config.CacheSize,
// default 4096), then CellIndex + CAS; a clean cell read
// from the CAS enters the cache. Writes go only to the delta: an upsert keeps
// its state bytes resident, a delete is a tombstone. Put copies its inputs.
//
// Spill: a state larger than SpillThreshold (64 KiB) is written to the CAS at
// once and the delta keeps only its hash. Resident upserts sit on an intrusive
// doubly linked list in write order (a rewrite moves a cell to the back); when
// resident bytes exceed ResidentBudget (64 MiB), the oldest are spilled in one
// PutBatch until the rest fit. Every step is O(1) amortized per byte written. A
// spilled cell is still dirty: it is in the delta, Materialize indexes it, and
// Get reads it back from the CAS by hash. Spilling changes residency, never the
// logical head.
//
// The delta is a map for lookups and, again, an Ordered (sorted chunks of at
// most 128 entries) in key-hash order: a new key costs a binary search and
// moving part of one chunk, and the delta can be read from any key hash on, or
// its first k entries taken for a drain slice, in O(log delta + k), with no
// sort of the whole delta. AscendFrom(after, fn) merges it with the index from
// after on; Page(after, limit) returns the first limit live cells after after
// (what `aosd cells ls` shows, a page at a time).
//
// Materialize writes resident dirty states with PutBatch, applies all upserts
// and deletes to the index in one sorted pass (O(dirty x depth)), promotes the
// newest flushed cells (at most CacheSize) into the hot cache, clears the delta
// and returns the new root. On error the head is unchanged. A head set to
// WriteMissingOnly (the kernel's, while it replays) writes states and nodes
// with cas.PutMissing instead, in Materialize, MaterializeSome and the
// drains prepared meanwhile: a replay re-creates index versions the store
// nearly always holds already.
//
// Len is index count plus delta adjustments. Whether a dirty key was already
// indexed is learned for free when the hot cache holds it and otherwise
// resolved lazily, for all unknown keys in one sorted walk of the index, the
// next time Len is asked; so Put never reads the index. The unknown entries
// are remembered in a list as they are written, so that resolution costs
// O(u log u + u x depth) for the u keys first written since the last Len,
// not a pass over the whole delta; with u = 0, Len is O(1). Delete of a key the
// head knows nothing about does one index lookup, so that deleting an absent
// cell leaves no tombstone.
//
// Prefetch(key) is for a reader that knows which cells come next (the
// kernel's replay reads the journal ahead of itself): it reads a cell into
// the hot cache, or notes a cell the index does not hold as absent (at most
// 4,096 notes), with the lock released while it reads the CAS, and keeps
// what it read only if the index is unchanged and the cell still clean. It
// changes what is in memory, never what a read returns.
//
// # Invariants
//
//   - The root is a function of the set of live cells only (TestIndexHistoryIndependence,
//     TestHeadMatchesReference compare against a one-batch build from empty).
//   - Deleting every cell gives EmptyRoot.
//   - A key is in at most one of delta and hot cache; the delta always wins.
//   - Cached cells are clean: equal to what the index at Root holds.
//   - Resident dirty bytes never exceed ResidentBudget after Put returns nil.
//   - Head memory is O(CacheSize + delta + branch cache + absentMax), independent of the
//     number of cells (TestHeadMemoryMillionCells).
//
// # Concurrency
//
// CellIndex values are immutable and safe for concurrent use. Head guards its
// state with a RWMutex: the kernel goroutine is the only writer (Put, Delete,
// Materialize); readers such as the CLI may call Get, Lookup, Ascend, Page,
// Len and Stats concurrently. Ascend and AscendFrom hold the read lock while
// they call fn (and read the store), so fn must not call the Head. Page holds
// it only to copy at most limit delta entries and the index version, and reads
// index nodes with it released, so a writer never waits for a page's I/O
// (TestPageReadsStoreWithoutLock).
package cells
