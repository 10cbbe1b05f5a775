package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"strconv"
	"strings"
)

// WriteHTML writes a self-contained report: the summary, a latency-over-time
// chart, a throughput-over-time chart and a latency-by-percentile chart, all
// as inline SVG. It loads nothing from anywhere.
func (res *Result) WriteHTML(w io.Writer) error {
	var text strings.Builder
	_ = res.WriteText(&text)
	var overTime, rps []series
	p50 := series{name: "p50", color: "#1f77b4"}
	p99 := series{name: "p99", color: "#d62728"}
	mx := series{name: "max", color: "#999999"}
	thr := series{name: "req/s", color: "#2ca02c"}
	target := series{name: "target", color: "#9467bd", dashed: true}
	for _, t := range res.Timeline {
		p50.pts = append(p50.pts, pt{t.Second, t.P50})
		p99.pts = append(p99.pts, pt{t.Second, t.P99})
		mx.pts = append(mx.pts, pt{t.Second, t.Max})
		thr.pts = append(thr.pts, pt{t.Second, t.RPS})
		if t.Target != nil {
			target.pts = append(target.pts, pt{t.Second, *t.Target})
		}
	}
	overTime = append(overTime, p50, p99, mx)
	rps = append(rps, thr)
	var users template.HTML
	// The stages are marked where each begins, on every chart over time.
	var marks []tick
	for _, st := range res.Stages {
		marks = append(marks, tick{st.StartSecond, st.Name})
	}
	if res.Ramp != nil && res.Ramp.Unit == unitUsers {
		target.name = "users"
		users = lineChart("Virtual users over time", "seconds", []series{target}, nil, false, marks...)
	} else if res.Ramp != nil {
		rps = append(rps, target)
	}
	pc := series{name: "latency", color: "#1f77b4"}
	for _, p := range res.Percentiles {
		pc.pts = append(pc.pts, pt{nines(p.Percentile), p.Ms})
	}
	var pticks []tick
	for i, l := range []string{"0%", "90%", "99%", "99.9%", "99.99%", "99.999%"} {
		pticks = append(pticks, tick{float64(i), l})
	}
	data := map[string]any{
		"Title":      "riftload report " + res.Started.Format("2006-01-02 15:04:05 UTC"),
		"Summary":    text.String(),
		"OverTime":   lineChart("Latency over time (ms, log scale)", "seconds", overTime, nil, true, marks...),
		"RPS":        lineChart("Throughput over time (req/s)", "seconds", rps, nil, false, marks...),
		"Users":      users,
		"Pct":        lineChart("Latency by percentile (ms, log scale)", "percentile", []series{pc}, pticks, true),
		"Thresholds": res.Thresholds,
		"Checks":     res.Checks,
	}
	if err := reportTmpl.Execute(w, data); err != nil {
		return fmt.Errorf("loadtest: writing HTML report: %w", err)
	}
	return nil
}

// nines maps a percentile to -log10(1-p): 90% is 1, 99% is 2, and so on;
// 100% is put half a nine past the last sampled point.
func nines(p float64) float64 {
	if p >= 100 {
		return 5.5
	}
	return -math.Log10(1 - p/100)
}

var reportTmpl = template.Must(template.New("report").Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{{.Title}}</title>
<style>body{font-family:sans-serif;max-width:960px;margin:1em auto;color:#222}
pre{background:#f6f6f6;padding:1em;overflow-x:auto}svg{display:block;margin:1em 0}
text{font-size:12px;font-family:sans-serif}table{border-collapse:collapse}
td,th{border:1px solid #ddd;padding:.2em .5em;text-align:left}tr.ok td:first-child{color:#2ca02c}
tr.fail td:first-child{color:#d62728;font-weight:bold}</style></head><body>
<h1>{{.Title}}</h1>
{{if .Thresholds}}<h2>Thresholds</h2>
<table><tr><th></th><th>threshold</th><th>step</th><th>measured</th></tr>
{{range .Thresholds}}<tr class="{{if .OK}}ok{{else}}fail{{end}}"><td>{{if .OK}}pass{{else}}FAIL{{end}}</td><td><code>{{.Threshold}}</code></td><td>{{.Step}}</td><td>{{.Describe}}</td></tr>
{{end}}</table>{{end}}
{{if .Checks}}<h2>Checks</h2>
<table><tr><th></th><th>check</th><th>step</th><th>passed</th><th>failed</th><th>first failure</th></tr>
{{range .Checks}}<tr class="{{if .Fails}}fail{{else}}ok{{end}}"><td>{{if .Fails}}FAIL{{else}}pass{{end}}</td><td><code>{{.Check}}</code></td><td>{{.Step}}</td><td>{{.Passes}}</td><td>{{.Fails}}</td><td>{{.Example}}</td></tr>
{{end}}</table>{{end}}
<pre>{{.Summary}}</pre>
{{.OverTime}}
{{.RPS}}
{{.Users}}
{{.Pct}}
</body></html>
`))

type pt [2]float64

type series struct {
	name, color string
	dashed      bool
	pts         []pt
}

type tick struct {
	v     float64
	label string
}

// Chart geometry, in SVG user units.
const (
	chartW, chartH         = 900.0, 320.0
	padL, padR, padT, padB = 70.0, 110.0, 30.0, 40.0
	plotW                  = chartW - padL - padR
	plotH                  = chartH - padT - padB
	logFloor               = 0.001 // 1 µs: the histogram's resolution
)

// lineChart draws series as polylines. xTicks, when nil, are chosen evenly;
// logY plots the y axis in decades; marks are labelled vertical lines (a
// ramp's stages).
func lineChart(title, xLabel string, ss []series, xTicks []tick, logY bool, marks ...tick) template.HTML {
	x0, x1 := math.Inf(1), math.Inf(-1)
	y0, y1 := math.Inf(1), math.Inf(-1)
	for _, s := range ss {
		for _, p := range s.pts {
			x0, x1 = min(x0, p[0]), max(x1, p[0])
			y := p[1]
			if logY {
				y = math.Log10(max(y, logFloor))
			}
			y0, y1 = min(y0, y), max(y1, y)
		}
	}
	if !math.IsInf(x0, 0) {
		for _, m := range marks {
			x0, x1 = min(x0, m.v), max(x1, m.v)
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%g" height="%g" viewBox="0 0 %g %g">`, chartW, chartH, chartW, chartH)
	fmt.Fprintf(&b, `<text x="%g" y="18" font-weight="bold">%s</text>`, padL, template.HTMLEscapeString(title))
	if math.IsInf(x0, 0) {
		fmt.Fprintf(&b, `<text x="%g" y="%g">no data</text></svg>`, padL, padT+plotH/2)
		return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped text
	}
	if logY {
		y0, y1 = math.Floor(y0), math.Ceil(y1)
	} else {
		y0 = 0
	}
	if y1 <= y0 {
		y1 = y0 + 1
	}
	if x1 <= x0 {
		x1 = x0 + 1
	}
	sx := func(x float64) float64 { return padL + (x-x0)/(x1-x0)*plotW }
	sy := func(y float64) float64 {
		if logY {
			y = math.Log10(max(y, logFloor))
		}
		return padT + plotH - (y-y0)/(y1-y0)*plotH
	}
	fmt.Fprintf(&b, `<rect x="%g" y="%g" width="%g" height="%g" fill="none" stroke="#ccc"/>`, padL, padT, plotW, plotH)
	// y grid
	if logY {
		for e := y0; e <= y1; e++ {
			v := math.Pow(10, e)
			y := sy(v)
			fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/><text x="%g" y="%.1f" text-anchor="end">%s</text>`,
				padL, y, padL+plotW, y, padL-6, y+4, strconv.FormatFloat(v, 'g', -1, 64))
		}
	} else {
		for i := 0; i <= 4; i++ {
			v := y0 + (y1-y0)*float64(i)/4
			y := sy(v)
			fmt.Fprintf(&b, `<line x1="%g" y1="%.1f" x2="%g" y2="%.1f" stroke="#eee"/><text x="%g" y="%.1f" text-anchor="end">%.4g</text>`,
				padL, y, padL+plotW, y, padL-6, y+4, v)
		}
	}
	if xTicks == nil {
		for i := 0; i <= 5; i++ {
			v := x0 + (x1-x0)*float64(i)/5
			xTicks = append(xTicks, tick{v, strconv.FormatFloat(v, 'f', 1, 64)})
		}
	}
	for _, t := range xTicks {
		x := sx(t.v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#eee"/><text x="%.1f" y="%g" text-anchor="middle">%s</text>`,
			x, padT, x, padT+plotH, x, padT+plotH+16, template.HTMLEscapeString(t.label))
	}
	fmt.Fprintf(&b, `<text x="%g" y="%g" text-anchor="middle">%s</text>`, padL+plotW/2, chartH-4, template.HTMLEscapeString(xLabel))
	for _, m := range marks {
		x := sx(m.v)
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%g" x2="%.1f" y2="%g" stroke="#bbb" stroke-dasharray="4 3"/><text x="%.1f" y="%g" fill="#666">%s</text>`,
			x, padT, x, padT+plotH, x+3, padT+12, template.HTMLEscapeString(m.label))
	}
	for i, s := range ss {
		dash := ""
		if s.dashed {
			dash = `stroke-dasharray="6 4" `
		}
		b.WriteString(`<polyline fill="none" stroke-width="1.5" ` + dash + `stroke="` + s.color + `" points="`)
		for _, p := range s.pts {
			fmt.Fprintf(&b, "%.1f,%.1f ", sx(p[0]), sy(p[1]))
		}
		b.WriteString(`"/>`)
		ly := padT + 14 + float64(i)*18
		fmt.Fprintf(&b, `<line x1="%g" y1="%g" x2="%g" y2="%g" stroke="%s" stroke-width="3"/><text x="%g" y="%g">%s</text>`,
			padL+plotW+10, ly-4, padL+plotW+30, ly-4, s.color, padL+plotW+36, ly, template.HTMLEscapeString(s.name))
	}
	b.WriteString(`</svg>`)
	return template.HTML(b.String()) //nolint:gosec // built from numbers and escaped text
}
