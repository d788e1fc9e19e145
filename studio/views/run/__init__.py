"""The Run page's parts: its state, the endpoint panel, the matrix and launch, the live runs."""
