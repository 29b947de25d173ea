"""`ioloom probe`: what each storage target really delivers over time, and which targets move together (Wan et
al., seed 004). `targets` says what a target is and measures one, `campaign` runs rounds of measurements on a
schedule, `store` keeps every measurement in a Parquet store that an interrupted campaign never damages,
`analysis` turns a store into distributions, correlations, modes and advice, and `page` draws the HTML page.
The method and the store's format: docs/probe.md."""
