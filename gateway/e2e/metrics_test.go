package e2e_test

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/riftgate/riftgate/gateway/gatewaytest"
)

// mbFamilies are the imposter metrics mb 2.9.1 exports (models/imposter.js).
var mbFamilies = []string{"mb_predicate_match_duration_seconds", "mb_no_match_total", "mb_request_total",
	"mb_response_generation_duration_seconds", "mb_blocked_ip_total"}

// scrape reads GET /metrics into the HELP and TYPE lines of mb's imposter
// families, and each of their samples with its ports replaced by names
// and, for durations, its value dropped (timings differ; counts must not).
func scrape(t *testing.T, url string, ports map[int]string) (meta []string, samples []string) {
	t.Helper()
	status, body := gatewaytest.Do(t, "GET", url+"/metrics", nil, nil)
	if status != 200 {
		t.Fatalf("GET %s/metrics: %d", url, status)
	}
	port := regexp.MustCompile(`:(\d+)`)
	for _, line := range strings.Split(string(body), "\n") {
		for _, f := range mbFamilies {
			if !strings.Contains(line, f) {
				continue
			}
			line = port.ReplaceAllStringFunc(line, func(m string) string {
				var p int
				fmt.Sscanf(m, ":%d", &p)
				if n, ok := ports[p]; ok {
					return ":" + n
				}
				return m
			})
			if strings.HasPrefix(line, "#") {
				meta = append(meta, line)
			} else {
				if strings.Contains(line, "_sum{") {
					line = line[:strings.LastIndexByte(line, ' ')]
				}
				samples = append(samples, line)
			}
		}
	}
	return meta, samples
}

// TestMetricsMatchMountebank sends the same requests to the same imposters
// on riftgate and on mb 2.9.1, and compares GET /metrics: the same
// families, help, types, labels, buckets and counts.
func TestMetricsMatchMountebank(t *testing.T) {
	rg := gatewaytest.Start(t)
	mbURL := mountebank(t)
	for _, u := range []string{rg.URL, mbURL} {
		// No imposter yet: neither exports the imposter families.
		if meta, _ := scrape(t, u, nil); len(meta) != 0 {
			t.Fatalf("%s exports imposter metrics before any imposter: %v", u, meta)
		}
	}
	run := func(url string) map[int]string {
		ports := map[int]string{}
		for i, imp := range []string{
			`"name":"shop","stubs":[{"predicates":[{"equals":{"path":"/a"}}],"responses":[{"is":{"body":"a"}}]}]`,
			`"stubs":[{"responses":[{"is":{"body":"b"},"behaviors":[{"wait":20}]}]}]`,
			`"name":"idle"`,
		} {
			port := gatewaytest.FreePort(t)
			ports[port] = fmt.Sprintf("P%d", i)
			if status, body := gatewaytest.Do(t, "POST", url+"/imposters", fmt.Sprintf(`{"protocol":"http","port":%d,%s}`, port, imp), nil); status != 201 {
				t.Fatalf("POST %s: %d %s", url, status, body)
			}
		}
		for port, name := range ports {
			switch name {
			case "P0":
				gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/a", port), nil, nil)
				gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/nothing", port), nil, nil)
				gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/a", port), nil, nil)
			case "P1":
				gatewaytest.Do(t, "GET", fmt.Sprintf("http://127.0.0.1:%d/", port), nil, nil)
			}
		}
		return ports
	}
	rgMeta, rgSamples := scrape(t, rg.URL, run(rg.URL))
	mbMeta, mbSamples := scrape(t, mbURL, run(mbURL))
	if !slices.Equal(rgMeta, mbMeta) {
		t.Errorf("HELP and TYPE lines differ:\nriftgate:\n%s\nmb:\n%s", strings.Join(rgMeta, "\n"), strings.Join(mbMeta, "\n"))
	}
	slices.Sort(rgSamples)
	slices.Sort(mbSamples)
	if !slices.Equal(rgSamples, mbSamples) {
		t.Errorf("samples differ:\nriftgate:\n%s\nmb:\n%s", strings.Join(rgSamples, "\n"), strings.Join(mbSamples, "\n"))
	}
}
