package canon_test

import (
	"os/exec"
	"strings"
	"testing"
)

// TestHotAppendersInline: the record encoders call AppendHead, AppendText
// and AppendBytes dozens of times per record, and a call each cost the
// native step path a few percent when a refactor pushed AppendText over the
// inliner's budget. The compiler's own report says whether they still fit.
func TestHotAppendersInline(t *testing.T) {
	out, err := exec.Command("go", "build", "-gcflags=-m", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build -gcflags=-m: %v\n%s", err, out)
	}
	for _, fn := range []string{"AppendHead", "AppendText", "AppendBytes", "AppendUint", "AppendMap", "AppendArray", "AppendBool"} {
		if !strings.Contains(string(out), "can inline "+fn+"\n") && !strings.Contains(string(out), "can inline "+fn+" ") {
			t.Errorf("%s no longer inlines; go build -gcflags=-m=2 ./internal/canon says why", fn)
		}
	}
}
