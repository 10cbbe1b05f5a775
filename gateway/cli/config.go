package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strconv"
)

// LoadConfigFile reads a --configfile as `mb start --configfile` does:
// rendered as an EJS template unless noParse, then parsed as JSON. The
// result is always `{"imposters":...}`: a file whose top-level "imposters"
// is missing or falsy is taken as a single imposter, as mb assumes the user
// left off the wrapper. Imposter JSON is passed through byte for byte.
func LoadConfigFile(ctx context.Context, path string, noParse bool) ([]byte, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cannot read configfile: %w", err)
	}
	contents := string(raw)
	if !noParse {
		contents, err = RenderTemplate(ctx, path, contents)
		if err != nil {
			return nil, fmt.Errorf("cannot render configfile: %w", err)
		}
	}
	out, err := wrapImposters([]byte(contents))
	if err != nil {
		return nil, fmt.Errorf("unable to parse configfile %s as JSON (after EJS rendering: %t): %w", path, !noParse, err)
	}
	return out, nil
}

// wrapImposters implements mb's `json.imposters || [json]` on raw JSON.
func wrapImposters(doc []byte) ([]byte, error) {
	doc = bytes.TrimPrefix(doc, []byte("\uFEFF"))
	if !json.Valid(doc) {
		var v any
		err := json.Unmarshal(doc, &v)
		return nil, fmt.Errorf("invalid JSON: %w", err)
	}
	doc = bytes.TrimSpace(doc)
	if bytes.Equal(doc, []byte("null")) {
		return nil, fmt.Errorf("the configfile is null")
	}
	var obj map[string]json.RawMessage
	if doc[0] == '{' {
		if err := json.Unmarshal(doc, &obj); err != nil {
			return nil, fmt.Errorf("decode configfile: %w", err)
		}
	}
	var b bytes.Buffer
	b.WriteString(`{"imposters":`)
	if imp, ok := obj["imposters"]; ok && truthy(imp) {
		b.Write(imp)
	} else {
		b.WriteByte('[')
		b.Write(doc)
		b.WriteByte(']')
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// truthy is JavaScript truthiness of a JSON value.
func truthy(raw json.RawMessage) bool {
	v := string(bytes.TrimSpace(raw))
	switch v {
	case "null", "false", `""`:
		return false
	}
	if f, err := strconv.ParseFloat(v, 64); err == nil {
		return f != 0
	}
	return true
}
