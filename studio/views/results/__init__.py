"""The Results page's parts: the run selection and header, then one module per tab."""
