"""The bundled data (the weekly CO2 record, a quarterly US macro panel; ``SOURCE.md`` names
their sources and licences) and synthetic series (:mod:`stacklstm.datasets.synthetic`)."""
