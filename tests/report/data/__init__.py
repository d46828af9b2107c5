"""Tests of uwbench.report.data: the study as the report sees it and the profile guard."""
