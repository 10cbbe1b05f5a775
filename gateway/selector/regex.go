package selector

import (
	"fmt"
	"regexp"
	"strings"
)

// CompileRegex compiles a JavaScript regular expression, as mb's
// predicates and copy/lookup behaviors write them, for Go's RE2 engine.
// The \uXXXX escape is translated; constructs RE2 lacks (lookaround,
// backreferences) are refused.
func CompileRegex(src string, ignoreCase, multiline bool) (*regexp.Regexp, error) {
	var b strings.Builder
	if ignoreCase || multiline {
		b.WriteString("(?")
		if ignoreCase {
			b.WriteByte('i')
		}
		if multiline {
			b.WriteByte('m')
		}
		b.WriteByte(')')
	}
	for i := 0; i < len(src); i++ {
		c := src[i]
		if c != '\\' || i+1 >= len(src) {
			b.WriteByte(c)
			continue
		}
		if src[i+1] == 'u' && i+5 < len(src) && isHex(src[i+2:i+6]) {
			fmt.Fprintf(&b, `\x{%s}`, src[i+2:i+6])
			i += 5
			continue
		}
		b.WriteByte(c)
		b.WriteByte(src[i+1])
		i++
	}
	re, err := regexp.Compile(b.String())
	if err != nil {
		return nil, fmt.Errorf("regular expression %q: %w", src, err)
	}
	return re, nil
}

func isHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F') {
			return false
		}
	}
	return true
}
