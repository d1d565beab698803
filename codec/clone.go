package codec

// Clone returns a deep copy of e that owns all its memory: it stays valid
// after the next Decode or Reset of the Decoder and after the input buffer is
// reused. Strings and Raw values are packed into a few shared chunks, so a
// clone costs a handful of allocations whatever the number of fields.
func (e *Event) Clone() *Event {
	a := &arena{}
	a.grow(e.size())
	c := *e
	c.TypeName = a.str(e.TypeName)
	c.RawEvent = a.raw(e.RawEvent)
	c.Metadata = a.raw(e.Metadata)
	for f := Field(0); f < numFields; f++ {
		if p := c.strField(f); p != nil {
			*p = a.str(*p)
		}
	}
	if e.Input != nil {
		in := e.Input.clone(a)
		c.Input = &in
	}
	c.Result = a.raw(e.Result)
	if e.Outcome != nil {
		c.Outcome = &Outcome{Type: a.str(e.Outcome.Type), Raw: a.raw(e.Outcome.Raw)}
	}
	if e.Usage != nil {
		c.Usage = make([]TokenUsage, len(e.Usage))
		for i, u := range e.Usage {
			u.Provider, u.Model = a.str(u.Provider), a.str(u.Model)
			c.Usage[i] = u
		}
	}
	c.Content = a.raw(e.Content)
	c.Snapshot = a.raw(e.Snapshot)
	c.Messages = cloneMessages(e.Messages, a)
	if e.Patch != nil {
		c.Patch = make([]PatchOp, len(e.Patch))
		for i, op := range e.Patch {
			op.Path, op.From = a.str(op.Path), a.str(op.From)
			op.Value, op.Raw = a.raw(op.Value), a.raw(op.Raw)
			c.Patch[i] = op
		}
	}
	c.PatchRaw = a.raw(e.PatchRaw)
	c.RawPayload = a.raw(e.RawPayload)
	c.Value = a.raw(e.Value)
	return &c
}

// size estimates the bytes Clone copies, so that one chunk usually holds
// them all (the arena grows if the estimate is short).
func (e *Event) size() int {
	n := len(e.TypeName) + len(e.RawEvent) + len(e.Metadata) + len(e.Result) + len(e.Content) +
		len(e.Snapshot) + len(e.PatchRaw) + len(e.RawPayload) + len(e.Value)
	for f := Field(0); f < numFields; f++ {
		if p := e.strField(f); p != nil {
			n += len(*p)
		}
	}
	if e.Input != nil {
		n += 2 * len(e.Input.Raw)
	}
	if e.Outcome != nil {
		n += len(e.Outcome.Raw) + len(e.Outcome.Type)
	}
	for i := range e.Patch {
		n += 2*len(e.Patch[i].Raw) + len(e.Patch[i].From)
	}
	for i := range e.Messages {
		m := &e.Messages[i]
		n += len(m.ID) + len(m.Role) + len(m.Content) + len(m.Name) + len(m.Metadata) + len(m.EncryptedValue) + 32
		for j := range m.ToolCalls {
			n += len(m.ToolCalls[j].Arguments) + len(m.ToolCalls[j].Name) + len(m.ToolCalls[j].ID)
		}
	}
	return n
}

func cloneMessages(msgs []Message, a *arena) []Message {
	if msgs == nil {
		return nil
	}
	out := make([]Message, len(msgs))
	for i, m := range msgs {
		m.ID, m.Role, m.Name = a.str(m.ID), a.str(m.Role), a.str(m.Name)
		m.Content = a.raw(m.Content)
		m.ToolCallID, m.Error, m.ActivityType = a.str(m.ToolCallID), a.str(m.Error), a.str(m.ActivityType)
		m.EncryptedValue, m.EncryptedValueType = a.str(m.EncryptedValue), a.str(m.EncryptedValueType)
		m.SubagentRunID = a.str(m.SubagentRunID)
		m.Metadata = a.raw(m.Metadata)
		if m.ToolCalls != nil {
			tcs := make([]ToolCall, len(m.ToolCalls))
			for j, tc := range m.ToolCalls {
				tc.ID, tc.Name, tc.Arguments = a.str(tc.ID), a.str(tc.Name), a.str(tc.Arguments)
				tc.EncryptedValue, tc.EncryptedValueType = a.str(tc.EncryptedValue), a.str(tc.EncryptedValueType)
				tc.Metadata = a.raw(tc.Metadata)
				tcs[j] = tc
			}
			m.ToolCalls = tcs
		}
		out[i] = m
	}
	return out
}

// Clone returns a deep copy of in that owns all its memory.
func (in *RunInput) Clone() *RunInput {
	a := &arena{}
	a.grow(2 * len(in.Raw))
	c := in.clone(a)
	return &c
}

func (in *RunInput) clone(a *arena) RunInput {
	c := *in
	c.ThreadID, c.RunID = a.str(in.ThreadID), a.str(in.RunID)
	c.ParentRunID, c.ProtocolVersion = a.str(in.ParentRunID), a.str(in.ProtocolVersion)
	c.State = a.raw(in.State)
	c.Messages = cloneMessages(in.Messages, a)
	c.Tools, c.Context = a.raw(in.Tools), a.raw(in.Context)
	c.ForwardedProps, c.Resume = a.raw(in.ForwardedProps), a.raw(in.Resume)
	c.Raw = a.raw(in.Raw)
	return c
}

// CloneMessages returns a deep copy of msgs that owns all its memory.
func CloneMessages(msgs []Message) []Message {
	return cloneMessages(msgs, &arena{})
}
