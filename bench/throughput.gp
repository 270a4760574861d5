# gnuplot script of `make bench`: warm GET throughput by object size, FastTier vs nginx, as a PNG.
# Called by bench/report.py with: datafile='...'; outfile='...'; ncols=N (first column: size label,
# then one column per series, first line = series titles, NaN = not measured).
if (!exists("datafile")) datafile = "throughput.dat"
if (!exists("outfile")) outfile = "benchmarks-throughput.png"
if (!exists("ncols")) ncols = 3

set terminal pngcairo size 960,540 font "sans,10"
set output outfile
set title "Warm GET throughput by object size (loopback, same files, median of alternating rounds)"
set ylabel "MiB/s of object data"
set xlabel "object size"
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set key top left
set grid ytics
set yrange [0:*]
plot for [i=2:ncols] datafile using i:xtic(1) title columnheader(i)
