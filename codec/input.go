package codec

// Standalone decoding of the values a run starts from: a RunAgentInput
// (RUN_STARTED.input's shape, or a reducer's --input file) and a messages
// array (the conformance `initial.messages`).

// DecodeRunInput decodes and validates a RunAgentInput object into in, with
// the same rules as RUN_STARTED.input (unknown members stripped with a
// warning, malformed known values fatal). The RunInput is valid until the
// next Decode or Reset of the Decoder; sonic's CopyString is off.
func (d *Decoder) DecodeRunInput(data []byte, in *RunInput) error {
	d.Reset()
	d.data = data
	*in = RunInput{}
	i := skipWS(data, 0)
	if i >= len(data) {
		return d.syntax(i, "empty input")
	}
	if data[i] != '{' {
		_, err := d.wrongType(i, "", "object (RunAgentInput)")
		return err
	}
	end, err := d.runInput(i, in)
	if err == nil {
		err = d.trailing(end)
	}
	if err != nil {
		return err
	}
	return nil
}

// DecodeMessages decodes and validates a JSON array of messages (any of the
// seven roles; elements of an unknown role are dropped with a warning). The
// messages are valid until the next Decode or Reset of the Decoder; sonic's
// CopyString is off.
func (d *Decoder) DecodeMessages(data []byte) ([]Message, error) {
	d.Reset()
	d.data = data
	i := skipWS(data, 0)
	if i >= len(data) {
		return nil, d.syntax(i, "empty input")
	}
	if data[i] != '[' {
		_, err := d.wrongType(i, "", "array of messages")
		return nil, err
	}
	msgs, _, end, err := d.messages(i)
	if err == nil {
		err = d.trailing(end)
	}
	if err != nil {
		return nil, err
	}
	return msgs, nil
}

// DecodeRunInput decodes data with a fresh Decoder. The RunInput's strings
// are views into data (or into memory owned by the RunInput alone): they
// stay valid as long as data is not modified. sonic's CopyString is off.
// Warnings are discarded; use Decoder.DecodeRunInput to see them.
func DecodeRunInput(data []byte, in *RunInput) error {
	var d Decoder
	return d.DecodeRunInput(data, in)
}
