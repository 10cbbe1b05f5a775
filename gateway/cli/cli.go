// Package cli is the `riftgate` command line: Mountebank's `mb` commands
// (start, stop, restart, save, replay) with mb's option names, defaults,
// pidfile, logfile and --configfile EJS templating, plus riftgate's --demo
// and the loadtest subcommand. cmd/riftgate only calls Main.
package cli

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/riftgate/riftgate/gateway"
)

// Main runs one riftgate command line (without the program name) and
// returns the process exit code: 0 on success, 1 on a usage or runtime
// error, as mb.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 && args[0] == "loadtest" {
		// The load generator has its own flags and help.
		return runLoadtest(ctx, args[1:], stdout, stderr)
	}
	s, err := parseArgs(args)
	if err != nil {
		return usageFail(stderr, "", err)
	}
	if s.boolean("version") {
		fmt.Fprintln(stdout, gateway.Version)
		return 0
	}
	if s.command == "help" {
		// mb accepts `mb help` as --help.
		printHelp(stdout, "", false)
		return 0
	}
	if !isCommand(s.command) {
		return usageFail(stderr, "", usageErrorf("Invalid command '%s'.", s.command))
	}
	if s.boolean("help") {
		printHelp(stdout, s.command, s.commandGiven)
		return 0
	}
	if warning, err := s.applyRCFile(); err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	} else if warning != "" {
		fmt.Fprintln(stderr, warning)
	}
	switch s.command {
	case "start":
		return start(ctx, s, stdout, stderr)
	case "stop":
		return stop(ctx, s, stderr)
	case "restart":
		if code := stop(ctx, s, stderr); code != 0 {
			return code
		}
		return start(ctx, s, stdout, stderr)
	case "save":
		return save(ctx, s, stderr)
	case "replay":
		return replay(ctx, s, stderr)
	}
	return usageFail(stderr, "", usageErrorf("Invalid command '%s'.", s.command))
}

func isCommand(name string) bool {
	for _, c := range commands {
		if c.name == name {
			return true
		}
	}
	return false
}

// usageFail prints err and the help text to stderr, as mb's yargs does, and returns 1.
func usageFail(stderr io.Writer, command string, err error) int {
	fmt.Fprintf(stderr, "%s\n\n", err)
	printHelp(stderr, command, command != "")
	return 1
}

// printHelp writes the general usage, or one command's options when detailed.
func printHelp(w io.Writer, command string, detailed bool) {
	var b strings.Builder
	if !detailed {
		b.WriteString("Usage: riftgate [command=start] [options...]\n\nCommands:\n")
		for _, c := range commands {
			fmt.Fprintf(&b, "  riftgate %-9s %s\n", c.name, c.help)
		}
		b.WriteString("\nOptions:\n  --help     Show help  [boolean]\n  --version  Show version number  [boolean]\n\n")
		b.WriteString("riftgate [command] --help provides more details\n\n")
		b.WriteString("For more information, see http://www.mbtest.org/docs/commandLine (riftgate takes the same options)\n")
		_, _ = io.WriteString(w, b.String()) // best effort, like fmt.Print
		return
	}
	fmt.Fprintf(&b, "Usage: riftgate %s [options...]\n\nOptions:\n", command)
	names := commandOptions[command]
	if command == "restart" {
		names = commandOptions["start"]
	}
	for _, name := range append(names, "help") {
		o := lookup(name)
		flag := "--" + o.name
		if o.alias != "" {
			flag = "-" + o.alias + ", " + flag
		}
		typ := map[kind]string{kString: "string", kInt: "number", kBool: "boolean"}[o.kind]
		def := ""
		if o.def != "" && o.kind != kBool {
			def = fmt.Sprintf(" [default: %q]", o.def)
		}
		fmt.Fprintf(&b, "  %-26s %s  [%s]%s\n", flag, o.help, typ, def)
	}
	b.WriteString("\nFor more information, see http://www.mbtest.org/docs/commandLine\n")
	_, _ = io.WriteString(w, b.String()) // best effort, like fmt.Print
}
