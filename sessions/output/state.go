package output

// TailState is a Tail's whole content as plain values, to keep it outside
// the heap (a finished session's output is spilled to disk) and bring it
// back unchanged.
type TailState struct {
	Max     int    `json:"max"`
	Text    string `json:"text"`
	Chars   int    `json:"chars"`
	Dropped int64  `json:"dropped"`
	Base    int64  `json:"base"`
}

// State returns t's content.
func (t *Tail) State() TailState {
	return TailState{Max: t.max, Text: t.String(), Chars: t.chars, Dropped: t.dropped, Base: t.base}
}

// TailFromState is the Tail whose State is st.
func TailFromState(st TailState) *Tail {
	t := NewTail(st.Max)
	t.buf = []byte(st.Text)
	t.chars, t.dropped, t.base = st.Chars, st.Dropped, st.Base
	return t
}

// LogState is a Log's whole content.
type LogState struct {
	Tail     TailState     `json:"tail"`
	Switches []SwitchState `json:"switches,omitempty"`
}

// SwitchState is where the stream changes (absolute byte offset).
type SwitchState struct {
	At     int64  `json:"at"`
	Stream Stream `json:"stream"`
}

// State returns l's content.
func (l *Log) State() LogState {
	st := LogState{Tail: l.Tail.State()}
	for _, sw := range l.switches {
		st.Switches = append(st.Switches, SwitchState{At: sw.at, Stream: sw.stream})
	}
	return st
}

// LogFromState is the Log whose State is st.
func LogFromState(st LogState) *Log {
	l := &Log{Tail: *TailFromState(st.Tail)}
	for _, sw := range st.Switches {
		l.switches = append(l.switches, streamSwitch{at: sw.At, stream: sw.Stream})
	}
	return l
}
