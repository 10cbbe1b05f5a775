package imposter

import (
	"encoding/json"
	"time"

	"github.com/riftgate/riftgate/gateway/mberr"
	"github.com/riftgate/riftgate/gateway/message"
)

// buildIs computes the response an `is` gives, with the imposter's
// defaultResponse filling what the stub leaves out.
func buildIs(stubIs, defaults json.RawMessage) (*message.Response, bool, error) {
	s, err := message.ParseResponseFields(stubIs)
	if err != nil {
		return nil, false, err
	}
	d, err := message.ParseResponseFields(defaults)
	if err != nil {
		return nil, false, err
	}
	return s.Response(&d)
}

// buildIs computes the response an `is` gives in the imposter's protocol.
func (imp *Imposter) buildIs(stubIs, defaults json.RawMessage) (*message.Response, bool, error) {
	if imp.spec.Protocol == "tcp" {
		// A tcp response is its own data; the defaultResponse's fills an
		// empty one only when it is written, as mb's tcp server does.
		if stubIs == nil {
			stubIs = defaults
		}
		return buildData(stubIs, imp.spec.Mode == "binary"), false, nil
	}
	return buildIs(stubIs, defaults)
}

// secs converts whole seconds to a duration.
func secs(n int64) time.Duration { return time.Duration(n) * time.Second }

// BuildResponse computes the response an `is`-shaped object gives in the
// imposter's protocol (what an inject script returns), with its
// defaultResponse filling what it leaves out.
func (imp *Imposter) BuildResponse(is json.RawMessage) (*message.Response, error) {
	r, _, err := imp.buildIs(is, imp.spec.DefaultResponse)
	if err != nil {
		return nil, mberr.New(mberr.BadData, "invalid response: "+err.Error()).WithSource(is)
	}
	return r, nil
}
