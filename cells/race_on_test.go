//go:build race

package cells_test

// raceEnabled: this test binary was built with -race, which makes the
// large reference runs ~10x slower; they run at full size without it (and
// under AOS_LONG=1, which .ci/run sets for its long step).
const raceEnabled = true
