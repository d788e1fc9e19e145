"""The Author page's parts: its state and actions, then one module per tab."""
