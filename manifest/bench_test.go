package manifest_test

import (
	"testing"

	"github.com/aos-kernel/aos/examples/built"
	"github.com/aos-kernel/aos/manifest"
)

func BenchmarkLoadExample(b *testing.B) {
	for b.Loop() {
		if _, err := manifest.Load(built.Dir(b) + "/orders"); err != nil {
			b.Fatal(err)
		}
	}
}
