set terminal pngcairo size 960,600 font ',11' noenhanced
set output '/work/main/bench/results/report/h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-outliers.png'
set title 'qwen3-30b-a3b mxfp8, B = 8, outliers inputs: error vs depth (gpu)'
set xlabel 'depth (MoE layers with residual + RMSNorm)'
set ylabel 'relative L2 error of the residual stream vs FP64'
set logscale y
set format y '%.0e'
set grid
set key left top
plot '/work/main/bench/results/report/gnuplot/h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-outliers.dat' using 1:2 with linespoints linewidth 2 pointtype 7 title 'warp decode (mxfp8)', \
     '/work/main/bench/results/report/gnuplot/h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-outliers.dat' using 1:3 with linespoints linewidth 2 pointtype 7 title 'classical BF16 (bf16)', \
     '/work/main/bench/results/report/gnuplot/h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-outliers.dat' using 1:4 with linespoints linewidth 2 pointtype 7 title 'classical FP8 (mxfp8)', \
     '/work/main/bench/results/report/gnuplot/h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-outliers.dat' using 1:5 with linespoints linewidth 2 pointtype 7 title 'classical W8A16 (mxfp8)', \
     '/work/main/bench/results/report/gnuplot/h200-accuracy-drift-qwen3-30b-a3b-mxfp8-b8-outliers.dat' using 1:6 with lines dashtype 2 linewidth 2 title 'weight quantization alone (FP64, mxfp8 vs bf16)'
