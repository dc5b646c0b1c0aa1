set terminal pngcairo size 960,600 font ',11' noenhanced
set output '/work/main/bench/results/report/h100-moe-qwen3-coder-480b-a35b.png'
set title 'qwen3-coder-480b-a35b: achieved TB/s vs batch size (NVIDIA H100 80GB HBM3)'
set xlabel 'batch size B (tokens)'
set ylabel 'TB/s (unique bytes read / time)'
set logscale x 2
set grid
set key left top
set yrange [0:3.652]
plot '/work/main/bench/results/report/gnuplot/h100-moe-qwen3-coder-480b-a35b.dat' index 0 using 1:2 with linespoints linewidth 2 pointtype 7 title 'warp bf16', \
     '/work/main/bench/results/report/gnuplot/h100-moe-qwen3-coder-480b-a35b.dat' index 1 using 1:2 with linespoints linewidth 2 pointtype 7 title 'warp mxfp8', \
     3.1757 with lines dashtype 2 linewidth 2 linecolor rgb 'black' title 'measured read ceiling 3.18 TB/s'
