module example.com/reactor

go 1.24
