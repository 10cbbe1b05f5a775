module github.com/riftgate/riftgate/sdk/go

go 1.26
