module github.com/riftgate/riftgate/examples/flowbench

go 1.26

require github.com/riftgate/riftgate/sdk/go v0.0.0

replace github.com/riftgate/riftgate/sdk/go => ../../sdk/go
