package main

import (
	"flag"
	"strings"
)

// nextPageCommand is the command line that lists the page after this one:
// "aosd", words (the command and its positional arguments), every flag the
// user set again with its value (--limit, the filters, --world, --direct:
// the next page must be of the same listing, of the same world), and
// --after next. --after, --all and --json are not repeated: the new cursor
// replaces the old one, --all prints no next page, and a hint is for the
// table.
func nextPageCommand(fs *flag.FlagSet, words []string, next string) string {
	parts := append([]string{"aosd"}, words...)
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "after", "all", "json":
			return
		}
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			if f.Value.String() == "true" {
				parts = append(parts, "--"+f.Name)
			}
			return
		}
		parts = append(parts, "--"+f.Name, f.Value.String())
	})
	parts = append(parts, "--after", next)
	for i, p := range parts {
		parts[i] = shellQuote(p)
	}
	return strings.Join(parts, " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// characters no shell treats specially.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789@%+=:,./_-") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
