//go:build race

package main_test

// raceEnabled: this test binary was built with -race, so the aosd it runs
// is built with -race too.
const raceEnabled = true
