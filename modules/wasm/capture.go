package wasm

import (
	"strconv"
	"strings"
)

// capture keeps what a guest writes to one stream during one step, bounded:
// the first half of its limit and the last half. A Go panic message is at
// the head; what a guest printed last is at the tail.
type capture struct {
	head  []byte // the first len(head) <= cap(head) bytes
	ring  []byte // the last bytes, circular once full
	pos   int    // next write position in ring once it is full
	total int    // bytes written since reset
}

func newCapture(limit int) capture {
	h := limit / 2
	return capture{head: make([]byte, 0, h), ring: make([]byte, 0, limit-h)}
}

func (c *capture) reset() {
	c.head, c.ring, c.pos, c.total = c.head[:0], c.ring[:0], 0, 0
}

func (c *capture) write(p []byte) {
	c.total += len(p)
	if n := min(cap(c.head)-len(c.head), len(p)); n > 0 {
		c.head = append(c.head, p[:n]...)
		p = p[n:]
	}
	if cap(c.ring) == 0 {
		return
	}
	if len(p) >= cap(c.ring) {
		c.ring = append(c.ring[:0], p[len(p)-cap(c.ring):]...)
		c.pos = 0
		return
	}
	if n := min(cap(c.ring)-len(c.ring), len(p)); n > 0 {
		c.ring = append(c.ring, p[:n]...)
		p = p[n:]
	}
	for len(p) > 0 {
		n := copy(c.ring[c.pos:], p)
		p = p[n:]
		c.pos = (c.pos + n) % len(c.ring)
	}
}

// String renders the capture for a fault reason: valid UTF-8, trailing
// space trimmed, and a marker where bytes were dropped.
func (c *capture) String() string {
	var b strings.Builder
	b.Write(c.head)
	if elided := c.total - len(c.head) - len(c.ring); elided > 0 {
		b.WriteString("\n…[" + strconv.Itoa(elided) + " bytes elided]…\n")
	}
	b.Write(c.ring[c.pos:])
	b.Write(c.ring[:c.pos])
	return strings.TrimRight(strings.ToValidUTF8(b.String(), "\uFFFD"), " \t\r\n")
}
