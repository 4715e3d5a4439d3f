package apitype

import "time"

// Price is one version of a kind's price on the server's price list.
type Price struct {
	// Kind names what is sold ("render-4k", "transcribe").
	Kind string `json:"kind"`
	// Version counts the kind's prices from 1; a job records the version it was submitted at.
	Version int `json:"version"`
	// Unit is what the kind is sold by: "job" (a fixed price) or "gpu_second" (metered).
	Unit string `json:"unit"`
	// UnitPrice is the credits one unit costs.
	UnitPrice int64 `json:"unit_price"`
	// MaxUnits is the most units one job may use, which its charge holds (1 for "job").
	MaxUnits int64 `json:"max_units"`
	// Memo says why the price was set.
	Memo string `json:"memo"`
	// CreatedAt is when this version was set.
	CreatedAt time.Time `json:"created_at"`
}

// Hold is what a job of this price holds when it asks for no smaller maximum of units.
func (p Price) Hold() int64 { return p.UnitPrice * p.MaxUnits }

// PriceList is the answer of GET /v1/prices.
type PriceList struct {
	// Prices are each kind's current price — what a job submitted now is charged — by kind.
	Prices []Price `json:"prices"`
}

// PriceHistory is the answer of GET /v1/prices/{kind}.
type PriceHistory struct {
	// Kind names the kind.
	Kind string `json:"kind"`
	// Versions are every price the kind has had, oldest first; the last is its current one. A
	// job keeps the version it was submitted at (its status's price_version).
	Versions []Price `json:"versions"`
}

// PriceRequest is the body of PUT /v1/prices/{kind} (admin).
type PriceRequest struct {
	// Unit is what the kind is sold by: job (a fixed price) or gpu_second (metered).
	Unit string `json:"unit"`
	// UnitPrice is the credits one unit costs, above zero.
	UnitPrice int64 `json:"unit_price"`
	// MaxUnits is the most units one job may use, which its charge holds: 1 for a kind sold by
	// the job (the default for that unit), required for gpu_second.
	MaxUnits *int64 `json:"max_units,omitempty"`
	// Memo says why the price was set; it is kept with the version.
	Memo string `json:"memo"`
}

// PriceSet is the answer of PUT /v1/prices/{kind}.
type PriceSet struct {
	// Outcome is applied for a new version, already_applied when the kind's current price
	// already said the same (nothing was written).
	Outcome string `json:"outcome"`
	// Price is the kind's current version: the new one, or the one that already said the same.
	Price Price `json:"price"`
}
