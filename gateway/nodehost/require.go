package nodehost

import (
	"context"
	"encoding/json"
	"io"
)

// requireJS answers what require(argv[1]) exports, as JSON.
const requireJS = `'use strict';
const fs = require('fs');
let answer;
try {
    answer = { result: require(process.argv[1]) };
} catch (err) {
    answer = { error: String(err) };
    process.exitCode = 1;
}
fs.writeSync(3, JSON.stringify(answer));
fs.closeSync(3);
`

// Require is what node's require(path) exports, as JSON (functions left
// out, as JSON.stringify leaves them): how mb reads a file it requires,
// such as a --protofile written in JavaScript.
func Require(ctx context.Context, path string, logw io.Writer) (json.RawMessage, error) {
	return Call(ctx, requireJS, []string{path}, nil, logw)
}
