package demo

import (
	"strings"
	"unicode/utf8"
)

// tokens splits text the way a model streams it: mostly one word per delta
// with its leading space, long words cut into two or three pieces, and each
// newline on its own. Concatenating the result gives text back byte for byte;
// cuts fall on rune boundaries only (a split inside a UTF-8 sequence could not
// be written as a JSON string).
func (s *Script) tokens(text string) []string {
	out := make([]string, 0, len(text)/5+1)
	start := 0
	for i := 1; i <= len(text); i++ {
		if i < len(text) && text[i] != ' ' && text[i] != '\n' && text[i-1] != '\n' {
			continue
		}
		out = s.appendWord(out, text[start:i])
		start = i
	}
	return out
}

// appendWord appends w, cut into pieces of 3 to 5 runes when it is longer
// than 9 runes (long words are several tokens for a real tokenizer too).
func (s *Script) appendWord(out []string, w string) []string {
	if utf8.RuneCountInString(w) <= 9 {
		return append(out, w)
	}
	for utf8.RuneCountInString(w) > 5 {
		n := 3 + s.r.IntN(3)
		cut := 0
		for k := 0; k < n; k++ {
			_, size := utf8.DecodeRuneInString(w[cut:])
			cut += size
		}
		out = append(out, w[:cut])
		w = w[cut:]
	}
	if w != "" {
		out = append(out, w)
	}
	return out
}

// chunks splits JSON argument text into deltas of 4 to 15 bytes, the way
// providers stream tool arguments (arguments are ASCII here except for a few
// city names; cuts avoid the middle of a UTF-8 sequence).
func (s *Script) chunks(text string) []string {
	var out []string
	for len(text) > 0 {
		n := 4 + s.r.IntN(12)
		if n >= len(text) {
			out = append(out, text)
			break
		}
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		out = append(out, text[:n])
		text = text[n:]
	}
	return out
}

// sentences joins n sentences drawn from bank, in bank order shifted by a
// random start so consecutive answers differ (a verbose script wraps around).
func (s *Script) sentences(bank []string, n int) string {
	start := s.r.IntN(len(bank))
	parts := make([]string, 0, n)
	for k := 0; k < n; k++ {
		parts = append(parts, bank[(start+k)%len(bank)])
	}
	return strings.Join(parts, " ")
}

// answerText is a final answer: an opening sentence, a few more, a Markdown
// list, and a closing line.
func (s *Script) answerText() string {
	p := s.p
	var b strings.Builder
	b.WriteString(s.sentences(p.answers, s.scaled(2, 4)))
	b.WriteString("\n\n")
	start := s.r.IntN(len(p.bullets))
	for k, nb := 0, min(s.scaled(2, 4), len(p.bullets)); k < nb; k++ {
		b.WriteString("- ")
		b.WriteString(p.bullets[(start+k)%len(p.bullets)])
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.WriteString(s.sentences(p.answers, s.scaled(1, 3)))
	return b.String()
}

// scaled draws a count in [lo, hi] and scales it by Options.Verbosity.
func (s *Script) scaled(lo, hi int) int {
	n := float64(lo+s.r.IntN(hi-lo+1)) * s.opts.Verbosity
	if n < 1 {
		return 1
	}
	return int(n + 0.5)
}
