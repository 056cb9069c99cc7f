//go:build !race

package main_test

// raceEnabled: this test binary was built without -race, so the aosd it
// runs is built without it as well (a race-built daemon runs several times
// slower, and only a race-enabled run looks for races).
const raceEnabled = false
