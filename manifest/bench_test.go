package manifest_test

import (
	"testing"

	"github.com/aos-kernel/aos/internal/examples"
	"github.com/aos-kernel/aos/manifest"
)

func BenchmarkLoadExample(b *testing.B) {
	for b.Loop() {
		if _, err := manifest.Load(examples.Dir(b) + "/orders"); err != nil {
			b.Fatal(err)
		}
	}
}
