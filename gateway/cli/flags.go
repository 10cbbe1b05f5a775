package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
)

type kind int

const (
	kString kind = iota
	kInt
	kBool
)

// option is one command-line option with mb's name, alias, default and help.
type option struct {
	name  string
	alias string // single letter, as mb's yargs aliases
	kind  kind
	def   string
	help  string
}

// options lists every option mb 2.9.1 knows, plus riftgate's --demo.
var options = []option{
	{name: "rcfile", help: `the startup file ("run commands") containing configuration options`},
	{name: "port", alias: "p", kind: kInt, def: "2525", help: "the port to run the server on"},
	{name: "host", alias: "h", help: "the hostname to bind the server to"},
	{name: "configfile", help: "file to load imposters from, can be an EJS template"},
	{name: "noParse", kind: kBool, def: "false", help: "prevent rendering the configfile as an EJS template"},
	{name: "formatter", def: "mountebank-formatters", help: "the custom formatter module to interpret --configfile formats and to use during mb save operations"},
	{name: "datadir", help: "the directory to persist all imposter data"},
	{name: "impostersRepository", help: "path to a custom imposters repository module, run on node; riftgate writes its configuration through to it and loads it at start"},
	{name: "pidfile", def: "mb.pid", help: "where the pid is stored for the stop command"},
	{name: "nologfile", kind: kBool, def: "false", help: "prevent logging to the filesystem"},
	{name: "logfile", def: "mb.log", help: "path to use for logging"},
	{name: "loglevel", def: "info", help: "level for logging (debug, info, warn, error)"},
	{name: "log", help: `customizable logging configuration (JSON, as mb: {"level":...,"transports":{"console":{},"file":{"path":...}}})`},
	{name: "allowInjection", alias: "i", kind: kBool, def: "false", help: "set to allow JavaScript injection"},
	{name: "localOnly", alias: "l", kind: kBool, def: "false", help: "allow connections only from localhost"},
	{name: "ipWhitelist", alias: "w", def: "*", help: "pipe-delimited list of allowed IP addresses"},
	{name: "mock", alias: "m", kind: kBool, def: "false", help: `[Deprecated] remember requests (use "recordRequests" per imposter instead)`},
	{name: "debug", alias: "d", kind: kBool, def: "false", help: "include stub match information in imposter retrievals for debugging purposes"},
	{name: "savefile", def: "mb.json", help: "file to save imposters to"},
	{name: "protofile", def: "protocols.json", help: "file to load custom protocols from"},
	{name: "removeProxies", alias: "r", kind: kBool, def: "false", help: "removes proxies from the configuration when using the save command"},
	{name: "origin", help: "safe origin for CORS requests"},
	{name: "apikey", help: "An optional API key. When provided, a user must add an API key to the header."},
	{name: "allowedHosts", help: "pipe-delimited host names the admin API answers to besides --host and loopback (\".example.com\" takes its subdomains too); other Host headers are refused, against DNS rebinding (riftgate only)"},
	{name: "demo", kind: kBool, def: "false", help: "load the bundled demo imposters (riftgate only)"},
	{name: "maxFlows", kind: kInt, def: "100000", help: "flows kept before whole flows are shed, least recently used first (riftgate only)"},
	{name: "flowBudget", kind: kInt, def: "2000", help: "milliseconds a request may spend on its flows in all, every owner call and wait included; past it the request answers 503 (riftgate only)"},
	{name: "maxRecordedRequests", kind: kInt, def: "0", help: "requests each recording imposter keeps (--mock, recordRequests), the oldest dropped first and counted; 0 keeps all, the newest in memory and the rest on disk (under --datadir, else in a temporary folder); an imposter's _rift.maxRecordedRequests overrides it (riftgate only)"},
	{name: "recordedRequestsMemory", kind: kInt, def: "32", help: "MiB of recorded requests kept in memory, the newest, for all imposters together; the others are read from disk (riftgate only)"},
	{name: "pprof", kind: kBool, def: "false", help: "serve Go's profiler under /debug/pprof/ on the admin API (riftgate only)"},
	{name: "help", kind: kBool, def: "false", help: "Show help"},
	{name: "version", kind: kBool, def: "false", help: "Show version number"},
}

// commandOptions are the options each command's help lists (mb's yargs
// sections). Parsing accepts every known option with every command, as mb does.
var commandOptions = map[string][]string{
	"start":   {"port", "host", "configfile", "noParse", "datadir", "pidfile", "nologfile", "logfile", "loglevel", "log", "allowInjection", "localOnly", "ipWhitelist", "mock", "debug", "origin", "allowedHosts", "rcfile", "apikey", "demo", "maxFlows", "flowBudget", "maxRecordedRequests", "recordedRequestsMemory", "pprof", "formatter", "impostersRepository", "protofile"},
	"stop":    {"pidfile", "rcfile"},
	"save":    {"port", "host", "savefile", "removeProxies", "apikey", "rcfile", "formatter"},
	"replay":  {"port", "host", "apikey", "rcfile"},
	"restart": nil, // same as start
}

var commands = []struct{ name, help string }{
	{"start", "Starts the server (default command)"},
	{"stop", "Stops the server"},
	{"restart", "Stops the server if it's running and restarts it"},
	{"save", "Saves current imposter configuration to a config file"},
	{"replay", "Switches from record mode to replay by removing proxies"},
	{"loadtest", "Runs the bundled load generator (riftgate loadtest help)"},
}

func lookup(name string) *option {
	for i := range options {
		if options[i].name == name {
			return &options[i]
		}
	}
	return nil
}

func lookupAlias(alias string) *option {
	for i := range options {
		if options[i].alias == alias {
			return &options[i]
		}
	}
	return nil
}

// settings are the parsed options of one invocation.
type settings struct {
	command      string
	commandGiven bool              // the command was named, not defaulted
	values       map[string]string // option name -> raw value, defaults filled in
	onCLI        map[string]bool   // options given on the command line
	// extras are options mb does not know, which it accepts (its parser
	// is not strict) and shows in GET /config: name and JSON value, in
	// the order given.
	extras [][2]string
}

// extra records an unknown option as mb's parser types it: a number, a
// boolean, or a string; with no value, true.
func (s *settings) extra(name, value string, hasValue bool) {
	v := "true"
	switch {
	case !hasValue:
	case value == "true" || value == "false":
		v = value
	case isNumber(value):
		f, _ := strconv.ParseFloat(value, 64)
		v = strconv.FormatFloat(f, 'f', -1, 64)
	default:
		b, _ := json.Marshal(value)
		v = string(b)
	}
	for i := range s.extras {
		if s.extras[i][0] == name {
			s.extras[i][1] = v
			return
		}
	}
	s.extras = append(s.extras, [2]string{name, v})
}

func (s *settings) str(name string) string { return s.values[name] }

func (s *settings) boolean(name string) bool { return s.values[name] == "true" }

func (s *settings) integer(name string) int {
	n, _ := strconv.Atoi(s.values[name]) // validated by set
	return n
}

// UsageError is a command line that cannot be run; Main prints it with the
// help text and exits 1, like mb.
type UsageError struct{ Msg string }

func (e *UsageError) Error() string { return e.Msg }

func usageErrorf(format string, a ...any) error {
	return &UsageError{Msg: fmt.Sprintf(format, a...)}
}

// parseArgs parses mb-style arguments: an optional command first (start by
// default), then --name value, --name=value, -p value, boolean --flag,
// --flag=false, --flag false and --no-flag, with kebab-case names accepted
// for camelCase ones. Unknown options are kept as extras, as mb keeps them.
func parseArgs(args []string) (*settings, error) {
	s := &settings{command: "start", values: map[string]string{}, onCLI: map[string]bool{}}
	for _, o := range options {
		if o.def != "" {
			s.values[o.name] = o.def
		}
	}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			positional = append(positional, args[i+1:]...)
			break
		}
		if len(a) < 2 || a[0] != '-' || isNumber(a) {
			positional = append(positional, a)
			continue
		}
		var (
			o        *option
			value    string
			hasValue bool
			negated  bool
			shown    = a
		)
		if strings.HasPrefix(a, "--") {
			name := a[2:]
			if k, v, ok := strings.Cut(name, "="); ok {
				name, value, hasValue = k, v, true
			}
			shown = "--" + name
			if o = lookup(name); o == nil {
				o = lookup(camel(name))
			}
			if o == nil && strings.HasPrefix(name, "no-") {
				if n := lookup(camel(name[3:])); n != nil && n.kind == kBool {
					o, negated = n, true
				}
			}
			if o == nil {
				if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					value, hasValue = args[i+1], true
					i++
				}
				s.extra(camel(name), value, hasValue)
				continue
			}
		} else {
			name := a[1:]
			if k, v, ok := strings.Cut(name, "="); ok {
				name, value, hasValue = k, v, true
			}
			if len(name) > 1 && !hasValue {
				// -il: a cluster of boolean aliases.
				for _, c := range name {
					b := lookupAlias(string(c))
					if b == nil {
						s.extra(string(c), "", false)
						continue
					}
					if b.kind != kBool {
						return nil, usageErrorf("Not enough arguments following: %s", string(c))
					}
					s.values[b.name], s.onCLI[b.name] = "true", true
				}
				continue
			}
			o = lookupAlias(name)
			if o == nil {
				if !hasValue && i+1 < len(args) && !strings.HasPrefix(args[i+1], "-") {
					value, hasValue = args[i+1], true
					i++
				}
				s.extra(name, value, hasValue)
				continue
			}
		}
		switch {
		case negated:
			if hasValue {
				return nil, usageErrorf("%s takes no value", shown)
			}
			value = "false"
		case o.kind == kBool && !hasValue:
			value = "true"
			if i+1 < len(args) && (args[i+1] == "true" || args[i+1] == "false") {
				value = args[i+1]
				i++
			}
		case !hasValue:
			if i+1 >= len(args) {
				return nil, usageErrorf("Not enough arguments following: %s", strings.TrimLeft(shown, "-"))
			}
			value = args[i+1]
			i++
		}
		if err := s.set(o, value); err != nil {
			return nil, err
		}
		s.onCLI[o.name] = true
	}
	if len(positional) > 0 {
		s.command, s.commandGiven = positional[0], true
	}
	// mb ignores positional arguments after the command.
	return s, nil
}

// set validates and stores one option value.
func (s *settings) set(o *option, value string) error {
	switch o.kind {
	case kBool:
		if value != "true" && value != "false" {
			return usageErrorf("Invalid value for --%s: %q (expected true or false)", o.name, value)
		}
	case kInt:
		n, err := strconv.Atoi(value)
		if o.name == "port" && (err != nil || n < 0 || n > math.MaxUint16) {
			return usageErrorf("Invalid value for --%s: %q (expected a port number)", o.name, value)
		}
		if err != nil || n < 0 {
			return usageErrorf("Invalid value for --%s: %q (expected a whole number)", o.name, value)
		}
		value = strconv.Itoa(n)
	}
	if o.name == "loglevel" && !slices.Contains([]string{"debug", "info", "warn", "error"}, value) {
		return usageErrorf("Invalid values:\n  Argument: loglevel, Given: %q, Choices: \"debug\", \"info\", \"warn\", \"error\"", value)
	}
	s.values[o.name] = value
	return nil
}

// applyRCFile fills in options from the --rcfile JSON object; options given
// on the command line win, as in mb. Keys are option names; values are JSON
// strings, numbers or booleans (ipWhitelist may also be an array). As mb
// does, a file that is missing or not a JSON object is only reported (the
// warning, for stderr), and a key that names no option is ignored.
func (s *settings) applyRCFile() (warning string, err error) {
	path := s.str("rcfile")
	if path == "" {
		return "", nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("Cannot find rcfile %s", path), nil
	}
	var rc map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	if err := dec.Decode(&rc); err != nil {
		return fmt.Sprintf("Cannot parse rcfile %s: %v", path, err), nil
	}
	for _, name := range sortedKeys(rc) {
		o := lookup(name)
		if o == nil || name == "rcfile" || name == "help" || name == "version" || s.onCLI[name] {
			continue
		}
		value, err := rcValue(o, rc[name])
		if err != nil {
			return "", fmt.Errorf("rcfile %s: option %q: %w", path, name, err)
		}
		if err := s.set(o, value); err != nil {
			return "", fmt.Errorf("rcfile %s: %w", path, err)
		}
	}
	return "", nil
}

// rcValue turns a JSON value into the string form the command line would give.
func rcValue(o *option, raw json.RawMessage) (string, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return "", fmt.Errorf("decode: %w", err)
	}
	switch x := v.(type) {
	case map[string]any:
		if o.name == "log" {
			return string(raw), nil
		}
	case string:
		return x, nil
	case bool:
		return strconv.FormatBool(x), nil
	case json.Number:
		return x.String(), nil
	case []any:
		if o.name != "ipWhitelist" {
			break
		}
		ips := make([]string, 0, len(x))
		for _, e := range x {
			ip, ok := e.(string)
			if !ok {
				return "", fmt.Errorf("ipWhitelist entries must be strings")
			}
			ips = append(ips, ip)
		}
		return strings.Join(ips, "|"), nil
	}
	return "", fmt.Errorf("unsupported value %s", raw)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// camel turns yargs' kebab-case spelling (--allow-injection) into the option name.
func camel(name string) string {
	if !strings.Contains(name, "-") {
		return name
	}
	parts := strings.Split(name, "-")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// isNumber reports whether a looks like a negative number (a value, not a flag).
func isNumber(a string) bool {
	_, err := strconv.ParseFloat(a, 64)
	return err == nil
}
