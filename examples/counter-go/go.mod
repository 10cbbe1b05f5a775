module github.com/riftgate/riftgate/examples/counter-go

go 1.26

require github.com/riftgate/riftgate/sdk/go v0.0.0

replace github.com/riftgate/riftgate/sdk/go => ../../sdk/go
