package main

import (
	"flag"
	"testing"
)

// TestNextPageCommand: the next-page hint repeats every flag the user set
// (the page size, the filters, the world), not --after, --all or --json,
// and quotes what a shell would split or expand.
func TestNextPageCommand(t *testing.T) {
	for _, c := range []struct {
		args  []string
		words []string
		want  string
	}{
		{[]string{"--limit", "2"}, []string{"cells", "ls", "com.example/counter.step@1"},
			"aosd cells ls com.example/counter.step@1 --limit 2 --after CUR"},
		{[]string{"--after", "OLD", "--status", "completed,failed", "--limit", "5", "--world", "/tmp/my world", "--json"}, []string{"cells", "ls", "wf@1"},
			"aosd cells ls wf@1 --limit 5 --status completed,failed --world '/tmp/my world' --after CUR"},
		{[]string{"--key", `"it's"`, "--direct"}, []string{"cells", "ls", "wf@1"},
			`aosd cells ls wf@1 --direct --key '"it'\''s"' --after CUR`},
		{[]string{"--direct=false"}, []string{"failed", "ls"}, "aosd failed ls --after CUR"},
		{nil, []string{"failed", "ls"}, "aosd failed ls --after CUR"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		fs.Int("limit", 0, "")
		fs.String("after", "", "")
		fs.Bool("all", false, "")
		fs.String("status", "", "")
		fs.String("key", "", "")
		fs.String("world", "", "")
		fs.Bool("json", false, "")
		fs.Bool("direct", false, "")
		if err := fs.Parse(c.args); err != nil {
			t.Fatal(err)
		}
		if got := nextPageCommand(fs, c.words, "CUR"); got != c.want {
			t.Errorf("%v:\n got %s\nwant %s", c.args, got, c.want)
		}
	}
}
