"""Witnesses: each finding's use performed for real on the baseline and target releases
(``--verify``), and the fix's rewritten use checked the same way."""
