package export

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
)

// The three tables. Each struct is the schema of its Parquet files (the
// parquet tags: column name, then options; a pointer field is an optional
// column, null when nil; timestamp columns are INT64 TIMESTAMP(MICROS,
// isAdjustedToUTC=true)) and of its NDJSON files (one object per row, the
// same keys, null for a null column, timestamps as RFC 3339 strings in UTC
// with microseconds). docs/export.md describes every column; the test
// TestSchemaColumns keeps the two in step.

// RunRow is one row of runs: the summary of one run that ended (the run
// summary ingest publishes on the tap, pipeline.RunSummary).
type RunRow struct {
	Tenant     string  `parquet:"tenant"`
	ThreadID   string  `parquet:"thread_id"`
	RunID      string  `parquet:"run_id"`
	StartSeq   int64   `parquet:"start_seq"`
	EndSeq     int64   `parquet:"end_seq"`
	StartedAt  int64   `parquet:"started_at,timestamp(microsecond)"`
	EndedAt    int64   `parquet:"ended_at,timestamp(microsecond)"`
	DurationMs int64   `parquet:"duration_ms"`
	Outcome    string  `parquet:"outcome"`
	Error      *string `parquet:"error,optional"`
	Code       *string `parquet:"code,optional"`
	Events     int64   `parquet:"events"`
	Messages   int64   `parquet:"messages"`
	ToolCalls  int64   `parquet:"tool_calls"`
	Activities int64   `parquet:"activities"`
	Reasoning  int64   `parquet:"reasoning"`
	Subagents  int64   `parquet:"subagents"`
	// Token counts: the sum over the usage entries that report the count;
	// null when none does (an absent count is never read as zero).
	InputTokens           *int64  `parquet:"input_tokens,optional"`
	OutputTokens          *int64  `parquet:"output_tokens,optional"`
	TotalTokens           *int64  `parquet:"total_tokens,optional"`
	ReasoningTokens       *int64  `parquet:"reasoning_tokens,optional"`
	CachedInputTokens     *int64  `parquet:"cached_input_tokens,optional"`
	CacheWriteInputTokens *int64  `parquet:"cache_write_input_tokens,optional"`
	Usage                 *string `parquet:"usage,optional,json"`
}

// MessageRow is one row of messages: a message of a thread's view as it stands
// at the end of the export range.
type MessageRow struct {
	Tenant       string  `parquet:"tenant"`
	ThreadID     string  `parquet:"thread_id"`
	MessageID    string  `parquet:"message_id"`
	Position     int64   `parquet:"position"`
	Role         string  `parquet:"role"`
	Name         *string `parquet:"name,optional"`
	RunID        *string `parquet:"run_id,optional"`
	Content      *string `parquet:"content,optional"`
	ContentJSON  *string `parquet:"content_json,optional,json"`
	ToolCallID   *string `parquet:"tool_call_id,optional"`
	ActivityType *string `parquet:"activity_type,optional"`
	Error        *string `parquet:"error,optional"`
	FirstSeq     int64   `parquet:"first_seq"`
	LastSeq      int64   `parquet:"last_seq"`
	FirstAt      int64   `parquet:"first_at,timestamp(microsecond)"`
	LastAt       int64   `parquet:"last_at,timestamp(microsecond)"`
}

// ToolCallRow is one row of tool_calls: a tool call of an assistant message,
// with its result when a tool message answers it.
type ToolCallRow struct {
	Tenant          string  `parquet:"tenant"`
	ThreadID        string  `parquet:"thread_id"`
	ToolCallID      string  `parquet:"tool_call_id"`
	Name            string  `parquet:"name"`
	ParentMessageID string  `parquet:"parent_message_id"`
	RunID           *string `parquet:"run_id,optional"`
	Arguments       string  `parquet:"arguments"`
	Result          *string `parquet:"result,optional"`
	ResultMessageID *string `parquet:"result_message_id,optional"`
	ResultError     *string `parquet:"result_error,optional"`
	FirstSeq        int64   `parquet:"first_seq"`
	LastSeq         int64   `parquet:"last_seq"`
	FirstAt         int64   `parquet:"first_at,timestamp(microsecond)"`
	LastAt          int64   `parquet:"last_at,timestamp(microsecond)"`
}

// Table names: the file name prefixes (<table>-<part>.<ext>).
const (
	TableRuns      = "runs"
	TableMessages  = "messages"
	TableToolCalls = "tool_calls"
)

// Tables lists the tables in the order a part writes them.
var Tables = [...]string{TableRuns, TableMessages, TableToolCalls}

// column is one column of a table, as the NDJSON encoder walks it.
type column struct {
	name      string
	index     int
	timestamp bool
}

var columnCache sync.Map // reflect.Type → []column

// columnsOf returns the columns of a row type from its parquet tags.
func columnsOf(t reflect.Type) []column {
	if c, ok := columnCache.Load(t); ok {
		return c.([]column)
	}
	var cols []column
	for i := range t.NumField() {
		tag := t.Field(i).Tag.Get("parquet")
		name, opts, _ := strings.Cut(tag, ",")
		cols = append(cols, column{name: name, index: i, timestamp: strings.Contains(opts, "timestamp(")})
	}
	columnCache.Store(t, cols)
	return cols
}

// Columns returns the column names of a row type (RunRow, MessageRow, ToolCallRow),
// in file order.
func Columns(row any) []string {
	var names []string
	for _, c := range columnsOf(reflect.TypeOf(row)) {
		names = append(names, c.name)
	}
	return names
}

// appendNDJSON appends row (a RunRow, MessageRow or ToolCallRow) as one JSON object
// and a newline.
func appendNDJSON(dst []byte, row any) []byte {
	v := reflect.ValueOf(row)
	dst = append(dst, '{')
	for i, c := range columnsOf(v.Type()) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, c.name)
		dst = append(dst, ':')
		f := v.Field(c.index)
		if f.Kind() == reflect.Pointer {
			if f.IsNil() {
				dst = append(dst, "null"...)
				continue
			}
			f = f.Elem()
		}
		switch {
		case c.timestamp:
			dst = append(dst, '"')
			dst = time.UnixMicro(f.Int()).UTC().AppendFormat(dst, "2006-01-02T15:04:05.000000Z")
			dst = append(dst, '"')
		case f.Kind() == reflect.String:
			dst = appendJSONString(dst, f.String())
		case f.Kind() == reflect.Int64:
			dst = strconv.AppendInt(dst, f.Int(), 10)
		default:
			panic(fmt.Sprintf("export: column %s has kind %s", c.name, f.Kind()))
		}
	}
	return append(dst, '}', '\n')
}

// appendJSONString appends s as a JSON string (encoding/json's escaping,
// without its HTML escapes).
func appendJSONString(dst []byte, s string) []byte {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(s) // a string always encodes
	return append(dst, strings.TrimSuffix(b.String(), "\n")...)
}
