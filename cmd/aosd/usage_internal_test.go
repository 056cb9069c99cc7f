package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// TestUsageExitCodesAsDocumented: the usage's exit codes say what
// docs/CLI.md says, shadow's exit 3 included, and the usage prints them.
func TestUsageExitCodesAsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/CLI.md")
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(doc, []byte("Exit codes:"))
	if i < 0 {
		t.Fatal("docs/CLI.md has no \"Exit codes:\" paragraph")
	}
	para, _, _ := strings.Cut(string(doc[i:]), "\n\n")
	words := func(s string) string {
		return strings.Join(strings.Fields(regexp.MustCompile("[*`]").ReplaceAllString(s, "")), " ")
	}
	if got, want := words(exitCodes), words(para); got != want {
		t.Fatalf("usage says\n  %s\ndocs/CLI.md says\n  %s", got, want)
	}
	if !strings.Contains(words(exitCodes), "not quiescent (apply, shadow)") {
		t.Fatalf("exit code 3 leaves shadow out: %s", exitCodes)
	}
	var b bytes.Buffer
	printUsage(&b)
	if !strings.Contains(b.String(), exitCodes) {
		t.Fatalf("the usage does not print the exit codes:\n%s", b.String())
	}
}
