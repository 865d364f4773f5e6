module forged.test/wordfreq

go 1.19
