package codec

// The retired THINKING_* events (versioning.md §4, registered until
// 2027-08-24): a consumer SHOULD translate a retired shape into its
// replacement rather than drop it (§3), before enforcement, and warn. The
// Decoder reads each as its REASONING_* replacement and validates it as
// one, except for the messageId that the replacement requires and the old
// shape never had: a THINKING opener mints a fresh id and its content and
// end continue it, which takes state across events that a Decoder does not
// keep. The Event therefore comes out without FieldMessageID, and the
// consumer supplies it (reducer.Thread does, from the stream's sequence).

// retiredType returns the REASONING_* type a retired THINKING_* name
// translates to, or TypeUnknown.
func retiredType(name string) Type {
	switch name {
	case "THINKING_START":
		return TypeReasoningStart
	case "THINKING_END":
		return TypeReasoningEnd
	case "THINKING_TEXT_MESSAGE_START":
		return TypeReasoningMessageStart
	case "THINKING_TEXT_MESSAGE_CONTENT":
		return TypeReasoningMessageContent
	case "THINKING_TEXT_MESSAGE_END":
		return TypeReasoningMessageEnd
	}
	return TypeUnknown
}

// translateRetired turns the event decoded from a retired name (still in
// ev.TypeName) into its replacement, as the reference's compatibility
// boundary does: a message start gets role "reasoning" and the type name
// becomes the replacement's. Properties the retired shape does not declare
// were stripped with a warning of their own: THINKING_START.title, and a
// messageId or role the producer added (field), since the translation sets
// both itself; the consumer mints or continues the id.
func (d *Decoder) translateRetired(ev *Event) {
	if ev.Type == TypeReasoningMessageStart {
		ev.Role, ev.Fields = "reasoning", ev.Fields.With(FieldRole)
	}
	old := ev.TypeName
	ev.TypeName = ev.Type.String()
	d.warn(KindRetired, Strip, 0, "type", "retired "+old+" translated to "+ev.TypeName+" (versioning.md §4)")
}
