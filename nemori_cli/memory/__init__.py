"""Memory management modes (the paper's appendix A) and the profile a database is built with."""
