package nodehost

import (
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
)

//go:embed formatter.js
var formatterJS string

// Formatter calls the --formatter module's fn ("load" or "save") with
// args, as mb's CLI does: require(module), then await module[fn](...args).
// module is an absolute path or a package name, which node resolves from
// the working directory (and NODE_PATH). The answer is fn's result as JSON.
func Formatter(ctx context.Context, module, fn string, logw io.Writer, args ...any) (json.RawMessage, error) {
	if args == nil {
		args = []any{} // JSON null would not spread
	}
	in, err := json.Marshal(args)
	if err != nil {
		return nil, fmt.Errorf("formatter arguments: %w", err)
	}
	return Call(ctx, formatterJS, []string{fn, module}, in, logw)
}
