package cluster

import (
	"testing"

	"github.com/riftgate/riftgate/raftnode"
)

func TestFlowCountGolden(t *testing.T) {
	c := FlowCount{MembershipIndex: 7, Owned: 300, Replicas: 2, Other: 0, Isolated: true}
	checkHex(t, "flow count", encode(t, c), "a501070219012c0302040005f5")
	var back FlowCount
	if err := raftnode.UnmarshalCBOR(encode(t, c), &back); err != nil || back != c {
		t.Fatalf("round trip: %+v %v", back, err)
	}
}
