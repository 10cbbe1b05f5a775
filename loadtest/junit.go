package loadtest

import (
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
)

// JUnit XML as CI servers read it (Jenkins, GitLab, GitHub's test
// reporters): one suite, one test case per threshold, a failure element
// for each that did not hold.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name      string      `xml:"name,attr"`
	Tests     int         `xml:"tests,attr"`
	Failures  int         `xml:"failures,attr"`
	Time      string      `xml:"time,attr"`
	Timestamp string      `xml:"timestamp,attr"`
	Cases     []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitFailure `xml:"failure,omitempty"`
	Output    string        `xml:"system-out,omitempty"`
}

type junitFailure struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
}

// WriteJUnit writes the thresholds as JUnit XML.
func (res *Result) WriteJUnit(w io.Writer) error {
	secs := strconv.FormatFloat(res.DurationSeconds, 'f', 3, 64)
	suite := junitSuite{Name: "riftload thresholds", Time: secs, Timestamp: res.Started.Format("2006-01-02T15:04:05")}
	for _, t := range res.Thresholds {
		class := "riftload.thresholds"
		if t.Step != "" {
			class += "." + t.Step
		}
		c := junitCase{Name: t.Threshold, Classname: class, Time: "0", Output: t.Describe()}
		if !t.OK {
			c.Failure = &junitFailure{Message: t.Describe(), Type: "threshold"}
			suite.Failures++
		}
		suite.Cases = append(suite.Cases, c)
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "riftload", Tests: suite.Tests, Failures: suite.Failures, Time: secs,
		Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return fmt.Errorf("loadtest: writing JUnit XML: %w", err)
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return fmt.Errorf("loadtest: writing JUnit XML: %w", err)
	}
	if _, err := io.WriteString(w, "\n"); err != nil {
		return fmt.Errorf("loadtest: writing JUnit XML: %w", err)
	}
	return nil
}
