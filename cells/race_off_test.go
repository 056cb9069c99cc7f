//go:build !race

package cells_test

const raceEnabled = false
