# Shared by the benchmarks in bench/.
# median: the median of the numbers on standard input, one a line (the mean of the two
# middle ones for an even count).
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
