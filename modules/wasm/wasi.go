package wasm

import (
	"context"
	"encoding/binary"
	"fmt"

	"github.com/tetratelabs/wazero"
	"github.com/tetratelabs/wazero/api"
	"github.com/tetratelabs/wazero/sys"
)

// wasiModule is the import module every guest links against.
const wasiModule = "wasi_snapshot_preview1"

// WASI errno values (preview 1).
const (
	errnoSuccess = 0
	errnoBadf    = 8
	errnoFault   = 21
	errnoInval   = 28
	errnoNosys   = 52
	errnoNotsup  = 58
)

// WASI clock ids.
const (
	clockRealtime  = 0
	clockMonotonic = 1
)

// Deterministic stand-ins. The monotonic clock is a counter that moves by
// clockStep on every read and by the full timeout on every sleep, so a guest
// that measures time or sleeps sees time pass, the same way on every run.
// The wall clock is frozen at wallStandIn: the Go runtime reads it at the
// end of every GC cycle (for MemStats.LastGC), so a read cannot be refused,
// and a frozen clock is plainly not the time to a workflow that tries.
const (
	wallStandIn   = 1_577_836_800_000_000_000 // 2020-01-01T00:00:00Z, in ns
	clockStart    = 1_000_000_000
	clockStep     = 1_000
	randSeedStart = 0x9e3779b97f4a7c15
)

// Violation reasons: the fault text of a step that asked for something a
// workflow must not have. Each names the WASI call and says where to go
// instead; none contains anything that varies between runs.
const (
	violRandom = "wasm guest asked for randomness (wasi random_get) during a step; " +
		"workflows must be deterministic: derive values from the input"
	violSleep = "wasm guest tried to sleep or wait (wasi poll_oneoff) during a step; " +
		"workflows wait with timer effects"
)

func violFile(call string) string {
	return "wasm guest tried to use the filesystem (wasi " + call + ") during a step; " +
		"workflows have no files: state and events are their only data"
}

func violNet(call string) string {
	return "wasm guest tried to use the network (wasi " + call + ") during a step; " +
		"workflows reach the world through effects"
}

// hostFunc is one WASI function as the host exports it. The signatures are
// wasi_snapshot_preview1's (the same as wazero's implementation); every
// function but proc_exit returns an errno.
type hostFunc struct {
	name   string
	params []api.ValueType
	fn     func(in *instance, mod api.Module, stack []uint64) uint32
	exit   bool // proc_exit: no result
}

const (
	i32 = api.ValueTypeI32
	i64 = api.ValueTypeI64
)

func params(t ...api.ValueType) []api.ValueType { return t }

// wasiFuncs is the whole of wasi_snapshot_preview1. Nothing reaches the
// host's clock, randomness, files, network or environment: each call gets a
// deterministic answer, and the calls a step must not make record a
// violation (see instance.violate).
var wasiFuncs = []hostFunc{
	{name: "args_get", params: params(i32, i32), fn: noop},
	{name: "args_sizes_get", params: params(i32, i32), fn: zeroSizes},
	{name: "environ_get", params: params(i32, i32), fn: noop},
	{name: "environ_sizes_get", params: params(i32, i32), fn: zeroSizes},
	{name: "clock_res_get", params: params(i32, i32), fn: clockResGet},
	{name: "clock_time_get", params: params(i32, i64, i32), fn: clockTimeGet},
	{name: "fd_advise", params: params(i32, i64, i64, i32), fn: file("fd_advise")},
	{name: "fd_allocate", params: params(i32, i64, i64), fn: file("fd_allocate")},
	{name: "fd_close", params: params(i32), fn: file("fd_close")},
	{name: "fd_datasync", params: params(i32), fn: file("fd_datasync")},
	{name: "fd_fdstat_get", params: params(i32, i32), fn: fdFdstatGet},
	{name: "fd_fdstat_set_flags", params: params(i32, i32), fn: file("fd_fdstat_set_flags")},
	{name: "fd_fdstat_set_rights", params: params(i32, i64, i64), fn: file("fd_fdstat_set_rights")},
	{name: "fd_filestat_get", params: params(i32, i32), fn: file("fd_filestat_get")},
	{name: "fd_filestat_set_size", params: params(i32, i64), fn: file("fd_filestat_set_size")},
	{name: "fd_filestat_set_times", params: params(i32, i64, i64, i32), fn: file("fd_filestat_set_times")},
	{name: "fd_pread", params: params(i32, i32, i32, i64, i32), fn: file("fd_pread")},
	{name: "fd_prestat_get", params: params(i32, i32), fn: file("fd_prestat_get")},
	{name: "fd_prestat_dir_name", params: params(i32, i32, i32), fn: file("fd_prestat_dir_name")},
	{name: "fd_pwrite", params: params(i32, i32, i32, i64, i32), fn: file("fd_pwrite")},
	{name: "fd_read", params: params(i32, i32, i32, i32), fn: fdRead},
	{name: "fd_readdir", params: params(i32, i32, i32, i64, i32), fn: file("fd_readdir")},
	{name: "fd_renumber", params: params(i32, i32), fn: file("fd_renumber")},
	{name: "fd_seek", params: params(i32, i64, i32, i32), fn: file("fd_seek")},
	{name: "fd_sync", params: params(i32), fn: file("fd_sync")},
	{name: "fd_tell", params: params(i32, i32), fn: file("fd_tell")},
	{name: "fd_write", params: params(i32, i32, i32, i32), fn: fdWrite},
	{name: "path_create_directory", params: params(i32, i32, i32), fn: file("path_create_directory")},
	{name: "path_filestat_get", params: params(i32, i32, i32, i32, i32), fn: file("path_filestat_get")},
	{name: "path_filestat_set_times", params: params(i32, i32, i32, i32, i64, i64, i32), fn: file("path_filestat_set_times")},
	{name: "path_link", params: params(i32, i32, i32, i32, i32, i32, i32), fn: file("path_link")},
	{name: "path_open", params: params(i32, i32, i32, i32, i32, i64, i64, i32, i32), fn: file("path_open")},
	{name: "path_readlink", params: params(i32, i32, i32, i32, i32, i32), fn: file("path_readlink")},
	{name: "path_remove_directory", params: params(i32, i32, i32), fn: file("path_remove_directory")},
	{name: "path_rename", params: params(i32, i32, i32, i32, i32, i32), fn: file("path_rename")},
	{name: "path_symlink", params: params(i32, i32, i32, i32, i32), fn: file("path_symlink")},
	{name: "path_unlink_file", params: params(i32, i32, i32), fn: file("path_unlink_file")},
	{name: "poll_oneoff", params: params(i32, i32, i32, i32), fn: pollOneoff},
	{name: "proc_exit", params: params(i32), fn: procExit, exit: true},
	{name: "proc_raise", params: params(i32), fn: func(*instance, api.Module, []uint64) uint32 { return errnoNosys }},
	{name: "sched_yield", fn: noop},
	{name: "random_get", params: params(i32, i32), fn: randomGet},
	{name: "sock_accept", params: params(i32, i32, i32), fn: sock("sock_accept")},
	{name: "sock_recv", params: params(i32, i32, i32, i32, i32, i32), fn: sock("sock_recv")},
	{name: "sock_send", params: params(i32, i32, i32, i32, i32), fn: sock("sock_send")},
	{name: "sock_shutdown", params: params(i32, i32), fn: sock("sock_shutdown")},
}

// wasiByName indexes wasiFuncs for the import check at compile time.
var wasiByName = func() map[string]*hostFunc {
	m := make(map[string]*hostFunc, len(wasiFuncs))
	for i := range wasiFuncs {
		m[wasiFuncs[i].name] = &wasiFuncs[i]
	}
	return m
}()

// instantiateWASI adds the host's wasi_snapshot_preview1 to r. Its functions
// find the calling instance in the context every guest call carries.
func instantiateWASI(ctx context.Context, r wazero.Runtime) error {
	b := r.NewHostModuleBuilder(wasiModule)
	for i := range wasiFuncs {
		f := &wasiFuncs[i]
		var results []api.ValueType
		if !f.exit {
			results = []api.ValueType{i32}
		}
		b.NewFunctionBuilder().
			WithGoModuleFunction(api.GoModuleFunc(func(ctx context.Context, mod api.Module, stack []uint64) {
				errno := f.fn(instanceOf(ctx), mod, stack)
				if !f.exit {
					stack[0] = uint64(errno)
				}
			}), f.params, results).
			Export(f.name)
	}
	_, err := b.Instantiate(ctx)
	return err
}

// callCtx is the context of every call into a guest: the caller's context
// (its deadline stops the guest) and the instance the host functions act for.
type callCtx struct {
	context.Context
	in *instance
}

type instanceKey struct{}

func (c *callCtx) Value(key any) any {
	if key == (instanceKey{}) {
		return c.in
	}
	return c.Context.Value(key)
}

func instanceOf(ctx context.Context) *instance {
	if c, ok := ctx.(*callCtx); ok {
		return c.in
	}
	// wazero may wrap the context (its experimental snapshotter does).
	if in, ok := ctx.Value(instanceKey{}).(*instance); ok {
		return in
	}
	// Every call into a guest carries its instance; a call that does not is
	// a bug of this package, reported as the host's failure.
	panic(errNoInstance)
}

var errNoInstance = fmt.Errorf("wasm: a WASI call reached the host without its instance")

var le = binary.LittleEndian

func noop(*instance, api.Module, []uint64) uint32 { return errnoSuccess }

// zeroSizes answers args_sizes_get and environ_sizes_get: nothing.
func zeroSizes(_ *instance, mod api.Module, stack []uint64) uint32 {
	mem := mod.Memory()
	if !mem.WriteUint32Le(uint32(stack[0]), 0) || !mem.WriteUint32Le(uint32(stack[1]), 0) {
		return errnoFault
	}
	return errnoSuccess
}

func clockResGet(_ *instance, mod api.Module, stack []uint64) uint32 {
	switch uint32(stack[0]) {
	case clockRealtime, clockMonotonic:
		if !mod.Memory().WriteUint64Le(uint32(stack[1]), clockStep) {
			return errnoFault
		}
		return errnoSuccess
	}
	return errnoInval
}

// clockTimeGet answers the monotonic clock with a counter and the wall
// clock with a frozen stand-in (see wallStandIn).
func clockTimeGet(in *instance, mod api.Module, stack []uint64) uint32 {
	var t uint64
	switch uint32(stack[0]) {
	case clockRealtime:
		t = wallStandIn
	case clockMonotonic:
		t = in.clock
		in.clock += clockStep
	default: // CPU-time clocks: not offered
		return errnoInval
	}
	if !mod.Memory().WriteUint64Le(uint32(stack[2]), t) {
		return errnoFault
	}
	return errnoSuccess
}

// randomGet fills the buffer from a generator seeded the same way in every
// instance, so what _initialize draws (the Go runtime seeds itself here) is
// the same on every run.
func randomGet(in *instance, mod api.Module, stack []uint64) uint32 {
	in.violate(violRandom)
	buf, ok := mod.Memory().Read(uint32(stack[0]), uint32(stack[1]))
	if !ok {
		return errnoFault
	}
	for i := 0; i < len(buf); i += 8 {
		var w [8]byte
		le.PutUint64(w[:], in.nextRand())
		copy(buf[i:], w[:])
	}
	return errnoSuccess
}

// fdFdstatGet describes stdin, stdout and stderr as blocking character
// devices (the Go runtime asks while it initializes); there are no other
// descriptors.
func fdFdstatGet(in *instance, mod api.Module, stack []uint64) uint32 {
	fd := uint32(stack[0])
	if fd > 2 {
		in.violate(violFile("fd_fdstat_get"))
		return errnoBadf
	}
	buf, ok := mod.Memory().Read(uint32(stack[1]), 24)
	if !ok {
		return errnoFault
	}
	const charDevice = 2
	const rightsRead, rightsWrite = 1 << 1, 1 << 6
	rights := uint64(rightsWrite)
	if fd == 0 {
		rights = rightsRead
	}
	clear(buf)
	buf[0] = charDevice
	le.PutUint64(buf[8:], rights)
	return errnoSuccess
}

// fdRead reads stdin, which is empty; a step must not read even that.
func fdRead(in *instance, mod api.Module, stack []uint64) uint32 {
	in.violate(violFile("fd_read"))
	if uint32(stack[0]) != 0 {
		return errnoBadf
	}
	if !mod.Memory().WriteUint32Le(uint32(stack[3]), 0) {
		return errnoFault
	}
	return errnoSuccess
}

// fdWrite captures stdout and stderr (bounded, per step); the tail ends up
// in the reason of a trap or exit. Every other descriptor is a file.
func fdWrite(in *instance, mod api.Module, stack []uint64) uint32 {
	var c *capture
	switch uint32(stack[0]) {
	case 1:
		c = in.stdout
	case 2:
		c = in.stderr
	default:
		in.violate(violFile("fd_write"))
		return errnoBadf
	}
	mem := mod.Memory()
	iovs, n := uint32(stack[1]), uint32(stack[2])
	var written uint32
	for i := uint32(0); i < n; i++ {
		iov, ok := mem.Read(iovs+8*i, 8)
		if !ok {
			return errnoFault
		}
		p, ok := mem.Read(le.Uint32(iov), le.Uint32(iov[4:]))
		if !ok {
			return errnoFault
		}
		c.write(p)
		written += uint32(len(p))
	}
	if !mem.WriteUint32Le(uint32(stack[3]), written) {
		return errnoFault
	}
	return errnoSuccess
}

// pollOneoff never blocks. A clock subscription fires at once and moves the
// monotonic clock past its timeout. One with a timeout is a sleep, which a
// step must not do; but the Go runtime sleeps on its way to crashing (a
// fatal panic), so a sleep is reported only if the step otherwise succeeds
// (instance.sleep). A zero timeout is a non-blocking poll, not a wait: the
// Go scheduler makes those during GC. Waiting on a descriptor is a
// filesystem call; it fails with EBADF, as none exists.
func pollOneoff(in *instance, mod api.Module, stack []uint64) uint32 {
	inPtr, outPtr, n, neventsPtr := uint32(stack[0]), uint32(stack[1]), uint32(stack[2]), uint32(stack[3])
	if n == 0 {
		return errnoInval
	}
	mem := mod.Memory()
	subs, ok := mem.Read(inPtr, n*48)
	if !ok {
		return errnoFault
	}
	events, ok := mem.Read(outPtr, n*32)
	if !ok {
		return errnoFault
	}
	clear(events)
	advance := uint64(0)
	for i := uint32(0); i < n; i++ {
		sub, ev := subs[48*i:48*i+48], events[32*i:32*i+32]
		copy(ev[0:8], sub[0:8]) // userdata
		ev[10] = sub[8]         // event type
		switch sub[8] {
		case 0: // clock: id u32 @16, timeout u64 @24, precision u64 @32, flags u16 @40
			timeout, abs := le.Uint64(sub[24:]), le.Uint16(sub[40:])&1 != 0
			if abs {
				if timeout > in.clock {
					timeout -= in.clock
				} else {
					timeout = 0
				}
			}
			if timeout > 0 {
				in.sleep()
			}
			advance = max(advance, timeout)
		case 1, 2: // fd_read, fd_write
			in.violate(violFile("poll_oneoff on a descriptor"))
			le.PutUint16(ev[8:], errnoBadf)
		default:
			return errnoInval
		}
	}
	in.clock += advance
	if !mem.WriteUint32Le(neventsPtr, n) {
		return errnoFault
	}
	return errnoSuccess
}

// procExit ends the call; the step becomes a fault naming the code.
func procExit(in *instance, _ api.Module, stack []uint64) uint32 {
	in.exited, in.exitCode = true, uint32(stack[0])
	panic(sys.NewExitError(in.exitCode))
}

// file is a filesystem call: there are no files (EBADF: no descriptor,
// preopened directories included, exists), and a step must not ask.
func file(call string) func(*instance, api.Module, []uint64) uint32 {
	reason := violFile(call)
	return func(in *instance, _ api.Module, _ []uint64) uint32 {
		in.violate(reason)
		return errnoBadf
	}
}

// sock is a socket call: there are no sockets, and a step must not ask.
func sock(call string) func(*instance, api.Module, []uint64) uint32 {
	reason := violNet(call)
	return func(in *instance, _ api.Module, _ []uint64) uint32 {
		in.violate(reason)
		return errnoNotsup
	}
}
